/*
 * sample-decl.c - a tool declaring every argument type, with defaults and
 * bounds that are awkward to print (0.1, 1e16, -0.0, text with control and
 * non-ASCII characters). tests/python/test_abx_tool.py declares the same
 * tool in Python and compares what both print; test-tool.c runs it too.
 * Its commands print their arguments back as JSON.
 */
#include <stdio.h>

#include <jansson.h>

#include "abx/tool.h"

static int
echo(const struct abx_tool_args *a, void *userdata)
{
    const char *const *cols;
    size_t n = abx_tool_get_strings(a, "columns", &cols);
    json_t *o = json_object(), *arr = json_array();

    (void)userdata;
    if (!o || !arr)
        return 1;
    json_object_set_new(o, "csv", json_string(abx_tool_get_string(a, "csv")));
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_string(cols[i]));
    json_object_set_new(o, "columns", arr);
    json_object_set_new(o, "kind", json_string(abx_tool_get_string(a, "kind")));
    json_object_set_new(o, "limit", json_integer(abx_tool_get_int(a, "limit")));
    json_object_set_new(o, "scale", json_real(abx_tool_get_number(a, "scale")));
    json_object_set_new(o, "big", json_real(abx_tool_get_number(a, "big")));
    json_object_set_new(o, "verbose", json_boolean(abx_tool_get_bool(a, "verbose")));
    json_object_set_new(o, "has_title", json_boolean(abx_tool_has(a, "title")));
    json_dumpf(o, stdout, JSON_COMPACT);
    putchar('\n');
    json_decref(o);
    return abx_tool_has(a, "title") && abx_tool_get_string(a, "title")[0] == '!' ? 3 : 0;
}

static int
nothing(const struct abx_tool_args *a, void *userdata)
{
    (void)a;
    (void)userdata;
    puts("{}");
    return 0;
}

static const char *const kinds[] = {"line", "bar", "scatter", NULL};
static const char *const units[] = {"cm", "in", "\xc3\xa9t\xc3\xa9", NULL};

static const struct abx_tool_arg echo_args[] = {
        {"csv", ABX_ARG_STRING, "CSV file, relative to the \"cwd\"", .required = true},
        {"columns", ABX_ARG_STRING_ARRAY, "Columns\tto plot \xe2\x80\x94 in order"},
        {"kind", ABX_ARG_ENUM, NULL, .default_json = "\"line\"", .choices = kinds},
        {"limit", ABX_ARG_INTEGER, "Rows", .default_json = "10", .minimum = "1", .maximum = "1000"},
        {"scale", ABX_ARG_NUMBER, "Scale", .default_json = "0.1", .minimum = "-0.5",
         .maximum = "1e16"},
        {"big", ABX_ARG_NUMBER, NULL, .default_json = "1e16"},
        {"zero", ABX_ARG_NUMBER, NULL, .default_json = "-0.0"},
        {"verbose", ABX_ARG_BOOLEAN, "Say more\x01", .default_json = "false"},
        {"title", ABX_ARG_STRING, "Title (\\ and / and \x7f)"},
        {"units", ABX_ARG_STRING_ARRAY, NULL, .default_json = "[\"cm\"]", .choices = units},
        {0},
};

static const struct abx_tool_command commands[] = {
        {"echo", "Prints its arguments \xe2\x9c\x93", echo_args, echo},
        {"nothing", "Takes no arguments", NULL, nothing},
        {0},
};

static const struct abx_tool tool = {"sample-decl", "Declares every type", commands};

int
main(int argc, char **argv)
{
    return abx_tool_main(&tool, argc, argv, NULL);
}
