# bankml -- one static binary, C11 + libc + pthreads.
#
#   make            build ./bankml (static, -O2 -Wall -Wextra -Werror)
#   make run        build, make the demo model if missing, serve it (http://127.0.0.1:18093)
#   make test       unit tests, CLI tests and (where the oracle kit is) oracle tests
#   make asan       the unit and CLI tests under AddressSanitizer + UBSan
#   make fuzz       libFuzzer targets (FUZZ_SECONDS each, default 60)
#   make bench      benchmarks (figures go to docs/PERFORMANCE.md by hand)

CC      ?= cc
CFLAGS  ?= -O2
WARN    := -Wall -Wextra -Werror
BASE    := -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -Ibuild/gen -pthread
LDLIBS  := -lm
PYTHON  ?= python3

SRC     := $(filter-out src/cli/main.c,$(wildcard src/*/*.c))
OBJ     := $(SRC:src/%.c=build/obj/%.o)
TESTSRC := tests/runner.c $(wildcard tests/test_*.c)
TESTOBJ := $(TESTSRC:tests/%.c=build/obj/tests/%.o)

all: bankml

bankml: build/obj/cli/main.o $(OBJ)
	$(CC) -static -pthread -o $@ $^ $(LDLIBS)

build/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) $(WARN) -MMD -MP -c -o $@ $<

build/obj/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Itests $(CFLAGS) $(WARN) -MMD -MP -c -o $@ $<

build/unit-tests: $(TESTOBJ) $(OBJ)
	$(CC) -pthread -o $@ $^ $(LDLIBS)

-include $(OBJ:.o=.d) $(TESTOBJ:.o=.d) build/obj/cli/main.d

# the chat page (src/api/ui/) built into the binary as C arrays (src/api/ui.c)
UI_FILES := src/api/ui/index.html src/api/ui/chat.css src/api/ui/chat.js
build/gen/ui_assets.h: $(UI_FILES) src/api/ui/embed.sh
	@mkdir -p build/gen
	sh src/api/ui/embed.sh $@ ui_index_html=src/api/ui/index.html ui_chat_css=src/api/ui/chat.css \
	    ui_chat_js=src/api/ui/chat.js
build/obj/api/ui.o build/asan/api/ui.o build/tsan/api/ui.o: build/gen/ui_assets.h

# ---- tests ----
test: bankml build/unit-tests
	$(PYTHON) testing/run_tests.py

# ---- sanitizers: everything rebuilt in build/asan ----
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
ASAN_OBJ   := $(SRC:src/%.c=build/asan/%.o)
ASAN_TOBJ  := $(TESTSRC:tests/%.c=build/asan/tests/%.o)

build/asan/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(ASAN_FLAGS) $(WARN) -MMD -MP -c -o $@ $<

build/asan/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Itests $(ASAN_FLAGS) $(WARN) -MMD -MP -c -o $@ $<

build/asan/unit-tests: $(ASAN_TOBJ) $(ASAN_OBJ)
	$(CC) $(ASAN_FLAGS) -pthread -o $@ $^ $(LDLIBS)

build/asan/bankml: build/asan/cli/main.o $(ASAN_OBJ)
	$(CC) $(ASAN_FLAGS) -pthread -o $@ $^ $(LDLIBS)

-include $(ASAN_OBJ:.o=.d) $(ASAN_TOBJ:.o=.d)

# ---- ThreadSanitizer: the server rebuilt in build/tsan, the concurrency probe run against it ----
TSAN_FLAGS := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
TSAN_OBJ   := $(SRC:src/%.c=build/tsan/%.o)

build/tsan/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(TSAN_FLAGS) $(WARN) -MMD -MP -c -o $@ $<

build/tsan/bankml: build/tsan/cli/main.o $(TSAN_OBJ)
	$(CC) $(TSAN_FLAGS) -pthread -o $@ $^ $(LDLIBS)

-include $(TSAN_OBJ:.o=.d)

tsan: build/tsan/bankml
	TSAN_OPTIONS=halt_on_error=0:exitcode=66 BANKML_BIN=build/tsan/bankml BANKML_READONLY_LIMIT=$${BANKML_READONLY_LIMIT:-3} BANKML_READONLY_SLOW=10 \
	  python3 testing/run_tests.py test_readonly

asan: build/asan/unit-tests build/asan/bankml
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	BANKML_BIN=build/asan/bankml BANKML_UNIT=build/asan/unit-tests BANKML_ORACLE=skip \
	$(PYTHON) testing/run_tests.py

# ---- fuzzing (clang's libFuzzer) ----
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_FLAGS   := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_TARGETS := $(patsubst tests/fuzz_%.c,build/fuzz/fuzz_%,$(wildcard tests/fuzz_*.c))

# each target links the sources it exercises (all of src/ when it names none; the kernels ask cpuid for F16C,
# which clang 14's __builtin_cpu_supports does not know)
FUZZ_SRC_json    := src/base/json.c src/base/base.c
FUZZ_SRC_gguf    := src/file/gguf.c src/base/json.c src/base/base.c
FUZZ_SRC_grammar := src/sampling/grammar.c src/sampling/regex.c src/sampling/sampler.c src/base/json.c src/base/base.c
FUZZ_DEF_grammar := -DSAMPLER_NO_GGUF
FUZZ_SRC_chat_analyze := $(wildcard src/text/chat_analyze*.c) $(wildcard src/text/template*.c) src/base/json.c src/base/base.c
FUZZ_SRC_peg     := src/text/peg.c src/text/peg_parse.c src/text/chat_peg.c src/sampling/peg_grammar.c \
                    $(wildcard src/sampling/json_schema*.c) src/base/json.c src/base/base.c
FUZZ_SRC_chat_spec := $(wildcard src/text/chat_spec*.c) $(wildcard src/text/chat_gen*.c) src/text/chat_analyze.c \
                    src/text/chat_analyze_util.c src/text/chat_analyze_tools.c src/text/chat_analyze_probe.c \
                    $(wildcard src/text/template*.c) src/text/peg.c src/text/peg_parse.c src/text/chat_peg.c \
                    src/sampling/peg_grammar.c $(wildcard src/sampling/json_schema*.c) src/base/json.c src/base/base.c
FUZZ_SRC_regex   := src/sampling/regex.c src/base/base.c
FUZZ_SRC_http    := src/api/serve.c src/api/serve_nljson.c src/base/json.c src/base/log.c src/base/progress.c src/base/base.c
FUZZ_SRC_template := $(wildcard src/text/template*.c) src/base/json.c src/base/base.c
FUZZ_SRC_tokenizer := $(wildcard src/text/tokenizer*.c) src/file/gguf.c src/file/ftype.c src/base/json.c src/base/base.c

build/fuzz/fuzz_%: tests/fuzz_%.c $(SRC) $(wildcard src/*/*.h) build/gen/ui_assets.h
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(BASE) $(FUZZ_DEF_$*) $(FUZZ_FLAGS) -o $@ $< $(or $(FUZZ_SRC_$*),$(SRC)) $(LDLIBS)

fuzz: $(FUZZ_TARGETS)
	@for t in $(FUZZ_TARGETS); do \
	  n=$$(basename $$t); mkdir -p build/fuzz/corpus-$$n; \
	  echo "== $$n for $(FUZZ_SECONDS) s"; \
	  if $$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	      build/fuzz/corpus-$$n tests/fuzz-seeds/$$n > build/fuzz/$$n.log 2>&1; \
	  then tail -2 build/fuzz/$$n.log; \
	  else tail -30 build/fuzz/$$n.log; echo "$$n: the fuzzer found a failure (build/fuzz/$$n.log)"; exit 1; fi; \
	done

# ---- models ----
models/demo.gguf: testing/demo_model.c
	@mkdir -p build models
	$(CC) $(BASE) -O2 $(WARN) -o build/demo-model testing/demo_model.c $(LDLIBS)
	./build/demo-model $@

demo-model: models/demo.gguf

run: bankml models/demo.gguf
	./bankml serve models/demo.gguf --fork models.FORK.json

# ---- benchmarks (figures go to docs/PERFORMANCE.md with their conditions) ----
bench: bankml
	sh testing/bench_sha256.sh
	$(PYTHON) testing/oracle_kernels_f16.py --bench
	$(PYTHON) testing/oracle_kernels_quant.py --bench
	$(PYTHON) testing/bench_forward.py
	$(PYTHON) testing/bench_serve.py

clean:
	rm -rf build bankml

# oracle kit targets (models, bench-models, ggml oracle program)
-include testing/oracle.mk

.PHONY: all test asan tsan fuzz demo-model run bench clean
