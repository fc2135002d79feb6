# The Makefile only keeps the contract; Meson does the work.
#   make        build bin/abxd and bin/abx, and the sample tool bundles
#   make run    install missing packages, build, start abxd on 127.0.0.1:8700
#               with the sample tools
#   make test   install missing packages and run every test
#   make bench  run the benchmarks and print the figures

BUILD      ?= build
MESON_OPTS ?= --buildtype=debugoptimized -Dwerror=true
STATE_DIR  ?= $(CURDIR)/var/state
LISTEN     ?= 127.0.0.1:8700
TOOLS_DIR  ?= $(BUILD)/tools

.PHONY: all tools deps run test bench clean format

all: bin/abxd bin/abx tools

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

# One recipe for both binaries (a grouped target): ninja runs once.
bin/abxd bin/abx &: $(BUILD)/build.ninja FORCE
	ninja -C $(BUILD)
	@mkdir -p bin
	install -m 0755 $(BUILD)/src/abxd bin/abxd
	install -m 0755 $(BUILD)/src/cli/abx bin/abx

FORCE:

# The sample tool bundles. Incremental (content hashes), so cheap when
# nothing changed; the python-stack carrier needs `make deps` (numpy ...).
tools: bin/abx
	bin/abx tools build --out $(TOOLS_DIR) sample-tools

deps:
	@./scripts/deps.sh

run: deps all
	@mkdir -p $(STATE_DIR)
	@echo "abxd: state in $(STATE_DIR); the API key is in $(STATE_DIR)/api-key"
	@echo "try:  ABX_API_KEY=\$$(cat $(STATE_DIR)/api-key) bin/abx create"
	exec bin/abxd --listen $(LISTEN) --state-dir $(STATE_DIR) --tools-dir $(TOOLS_DIR)

test: deps
	./scripts/test.sh

bench: deps all
	./bench/run.sh

# Mutation fuzzing (scripts/fuzz.sh, docs/testing.md): every target for
# FUZZ_SECONDS (default 60), or FUZZ_TARGETS="connect tar"; grows the corpora.
.PHONY: fuzz
fuzz:
	./scripts/fuzz.sh

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) build-asan bin
