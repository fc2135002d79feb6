/*
 * schema.h - the JSON Schema subset tool commands declare, and argument
 * validation against it.
 *
 * A command's arguments are a flat object: each property a string, integer,
 * number, boolean, or array of strings, optionally with an enum, a default
 * and bounds. tool_schema_check() says whether a schema stays inside that
 * subset (abxd checks every bundle's schemas at discovery, the author
 * libraries check what they generate); tool_schema_validate() checks one
 * call's arguments against a checked schema before anything runs. The same
 * rules, with the same messages, are implemented by sdk/python/abx_tool.py;
 * docs/tools.md lists them.
 *
 * Both functions are pure: they borrow their arguments, keep nothing, never
 * log, and are thread-safe. Failure is -EINVAL with err filled; values from
 * the caller appear in messages escaped (no control characters) and cut to
 * TOOL_SCHEMA_QUOTE_MAX characters. This module is also compiled into the
 * public libabxtool.a, so it needs jansson and util/err.h (the header only)
 * and nothing else.
 */
#pragma once

#include <jansson.h>

#include "util/err.h"

#define TOOL_SCHEMA_MAX_PROPERTIES 128  /* properties in one schema */
#define TOOL_SCHEMA_MAX_ENUM       256  /* values of an enum, items of an array default */
#define TOOL_SCHEMA_MAX_NAME       64   /* bytes of a property name */
#define TOOL_SCHEMA_MAX_TEXT       8192 /* bytes of a description, title, enum value, default */
#define TOOL_SCHEMA_QUOTE_MAX      40   /* characters of a caller's value quoted in a message */

/* libabxtool.a exports abx_* only: tool.c compiles schema.c into itself
 * with TOOL_SCHEMA_STATIC defined, giving these functions internal linkage. */
#ifdef TOOL_SCHEMA_STATIC
#define TOOL_SCHEMA_API static
#else
#define TOOL_SCHEMA_API
#endif

/*
 * Returns 0 when schema is an object schema we can enforce:
 *
 *   {"type": "object", "properties": {<name>: <property>, ...},
 *    "required": [<name>, ...], "additionalProperties": false,
 *    "description": "...", "title": "...", "$schema": "..."}
 *
 * ("required", "additionalProperties" (false only), "description", "title"
 * and "$schema" are optional). A property name matches
 * [A-Za-z_][A-Za-z0-9_-]{0,63}; a property has a "type" of "string",
 * "integer", "number", "boolean" or "array" and may have "description",
 * "title", "default" (valid against the property), "enum" (strings; type
 * string), "minimum"/"maximum" (numbers; integer and number),
 * "minLength"/"maxLength" (string), "minItems"/"maxItems" (array) and, for
 * an array, must have "items" of type string (with optional "enum",
 * "minLength", "maxLength", "description", "title"). Anything else
 * (another keyword, nested objects, $ref, oneOf, a type list) is -EINVAL
 * naming the keyword and the property.
 */
TOOL_SCHEMA_API int tool_schema_check(const json_t *schema, struct err *err);

/*
 * Returns 0 when args satisfy schema, which must have passed
 * tool_schema_check(). args must be an object; in this order: each of its
 * keys must be a property (when additionalProperties is false), then, in
 * the schema's property order, each required property must be present and
 * each present value must have the property's type (integer: a JSON integer
 * only; number: integer or real; boolean: true/false; strings: no NUL),
 * be in its enum and within its bounds. The first failure is -EINVAL with a
 * message such as "'limit' must be an integer, not a string",
 * "'mode' must be one of \"mean\", \"max\" (got \"avg\")" or
 * "unknown argument 'colum'". Defaults are not applied here.
 */
TOOL_SCHEMA_API int tool_schema_validate(const json_t *schema, const json_t *args, struct err *err);
