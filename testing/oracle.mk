# oracle.mk -- make targets of the oracle kit (included by the Makefile; paths from the repository root).
#
#   make models          the small random-weight test models into build/models (incremental: a no-op when
#                        they exist and testing/make_models.py and llama-quantize are unchanged)
#   make graph-models    real graphs' shapes (Qwen2.5-0.5B, Llama-3.2-1B; two layers, real vocabularies) in
#                        F16 and Q8_0 into build/graph-models (testing/make_graph_models.py; incremental)
#   make quant-models    llama-quantize's mixes (Q4_K_M, Q5_K_M, Q6_K, Q4_0, ...) into build/quant-models
#   make bench-models    the big shapes (SmolLM2-135M F16, Bonsai-1.7B Q1_0/Q2_0; both as Q4_K_M, Q6_K, Q4_0) into build/bench-models
#   make models-sha256   rewrites testing/models.sha256 from build/models (after a deliberate change of
#                        the generator; the list is committed and checked by testing/oracle_kit.py)
#   make build/ggml-oracle   the in-process ggml program (run it with the kit's sid-run)
#   make build/kit-llama-dump  per-tensor dumps of a whole model through libllama (also under sid-run)
#
# The kit is llama.cpp b11669 as installed by ../shared/oracle/install.sh.

ORACLE_DIR ?= $(HOME)/.cache/bankml-oracle
ORACLE_BIN := $(ORACLE_DIR)/bin
ORACLE_INC := $(ORACLE_DIR)/root/usr/include
ORACLE_LIB := $(ORACLE_DIR)/root/usr/lib/x86_64-linux-gnu
BANKML_SHARED ?= ../shared
GGUF_PY := $(ORACLE_BIN)/gguf-py

$(ORACLE_BIN)/gguf-py $(ORACLE_INC)/ggml.h:
	sh $(BANKML_SHARED)/oracle/install.sh >/dev/null

models: $(GGUF_PY)
	@BANKML_SHARED=$(BANKML_SHARED) $(GGUF_PY) testing/make_models.py --kit $(ORACLE_BIN) build/models

graph-models: $(GGUF_PY)
	@BANKML_SHARED=$(BANKML_SHARED) $(GGUF_PY) testing/make_graph_models.py --kit $(ORACLE_BIN) $(GRAPH_MODELS_ONLY) build/graph-models

quant-models: $(GGUF_PY)
	@BANKML_SHARED=$(BANKML_SHARED) $(GGUF_PY) testing/make_models.py --quant --kit $(ORACLE_BIN) build/quant-models

bench-models: $(GGUF_PY)
	BANKML_SHARED=$(BANKML_SHARED) $(GGUF_PY) testing/make_models.py --bench --kit $(ORACLE_BIN) build/bench-models

models-sha256: models
	@{ echo "# sha256 of every file testing/make_models.py writes (make models-sha256 rewrites this list)"; \
	   $(GGUF_PY) testing/make_models.py --sha256 build/models; } > testing/models.sha256

# Linked by name against the kit's libggml-base; the kit's libraries need a newer glibc than this
# system's, which sid-run's loader supplies at run time, hence --allow-shlib-undefined. The CPU
# backend is dlopen'ed from GGML_BACKEND_PATH (set by sid-run).
build/ggml-oracle: testing/ggml_oracle.c $(ORACLE_INC)/ggml.h
	@mkdir -p build
	$(CC) -std=gnu11 -D_GNU_SOURCE -O2 $(WARN) -I$(ORACLE_INC) -o $@ testing/ggml_oracle.c \
	    -L$(ORACLE_LIB) -l:libggml-base.so.0 -ldl -lm -Wl,--allow-shlib-undefined

.PHONY: models graph-models quant-models bench-models models-sha256

# A whole model in libllama with every graph tensor written as raw bits (see testing/kit_llama_dump.c).
build/kit-llama-dump: testing/kit_llama_dump.c $(ORACLE_INC)/ggml.h
	@mkdir -p build
	$(CC) -std=gnu11 -D_GNU_SOURCE -O2 $(WARN) -I$(ORACLE_INC) -o $@ testing/kit_llama_dump.c \
	    -L$(ORACLE_LIB) -l:libllama.so.0 -l:libggml.so.0 -l:libggml-base.so.0 -lm -Wl,--allow-shlib-undefined

# The JSON schema converter against b11669's own (testing/oracle_schema.py): bankml's side, and the kit
# program calling json_schema_to_grammar from libllama-common.so (run under sid-run). The kit needs
# llama.cpp's headers (common/json.h, common/json-schema-to-grammar.h) from ../shared/oracle/llama-src.sh's
# checkout; common_json hides nlohmann behind a pimpl, so no nlohmann header is involved.
LLAMA_SRC ?= $(HOME)/.cache/llama.cpp-src
CXX_KIT   ?= g++

build/schema-driver: testing/schema_driver.c src/sampling/json_schema.c src/sampling/json_schema.h src/base/json.c src/base/json.h
	@mkdir -p build
	$(CC) $(BASE) -O2 $(WARN) -o $@ testing/schema_driver.c src/sampling/json_schema.c src/base/json.c $(LDLIBS)

$(LLAMA_SRC)/common/json-schema-to-grammar.h:
	sh $(BANKML_SHARED)/oracle/llama-src.sh >/dev/null

build/kit-schema: testing/kit_schema.cpp $(LLAMA_SRC)/common/json-schema-to-grammar.h $(ORACLE_INC)/ggml.h
	@mkdir -p build
	$(CXX_KIT) -std=c++17 -O2 -Wall -I$(LLAMA_SRC)/common -o $@ testing/kit_schema.cpp \
	    -L$(ORACLE_LIB) -l:libllama-common.so.0 -Wl,--allow-shlib-undefined

# The differential template analysis against b11669's own (testing/oracle_chat_analyze.py): bankml's side,
# and the kit program calling autoparser::analyze_template from libllama-common.so (run under sid-run; it
# also needs llama.cpp's headers: common/chat-auto-parser.h and what it includes).
CHAT_ANALYZE_SRC := src/text/chat_analyze.c src/text/chat_analyze_tools.c src/text/chat_analyze_util.c src/text/chat_analyze_probe.c \
    src/text/template.c src/text/template_builtins.c src/text/template_eval.c src/text/template_parse.c \
    src/text/template_value.c src/text/template_legacy.c src/text/template_caps.c src/base/json.c src/base/base.c
build/chat-analyze-driver: testing/chat_analyze_driver.c $(CHAT_ANALYZE_SRC) src/text/chat_analyze.h src/text/chat_analyze_int.h src/text/template.h
	@mkdir -p build
	$(CC) $(BASE) -O2 $(WARN) -o $@ testing/chat_analyze_driver.c $(CHAT_ANALYZE_SRC) $(LDLIBS)

build/kit-chat-analyze: testing/kit_chat_analyze.cpp $(LLAMA_SRC)/common/json-schema-to-grammar.h $(ORACLE_INC)/ggml.h
	@mkdir -p build
	$(CXX_KIT) -std=c++17 -O1 -w -I$(LLAMA_SRC)/common -I$(ORACLE_INC) -o $@ testing/kit_chat_analyze.cpp \
	    -L$(ORACLE_LIB) -l:libllama-common.so.0 -ldl -Wl,--allow-shlib-undefined
# b11669's chat layer (templates_apply, its PEG arena, common_chat_peg_parse) for testing/oracle_peg.py:
# testing/kit_chat.cpp against v0.5.0's common/ headers (peg-parser.h, json.h, json-schema*.h), run
# under sid-run; the chat structs b11669 changed are declared in the kit itself.
build/kit-chat: testing/kit_chat.cpp $(LLAMA_SRC)/common/json-schema-to-grammar.h $(ORACLE_INC)/ggml.h
	@mkdir -p build
	$(CXX_KIT) -std=c++17 -O2 -Wall -fvisibility=hidden -fvisibility-inlines-hidden -I$(LLAMA_SRC)/common -o $@ testing/kit_chat.cpp \
	    -L$(ORACLE_LIB) -l:libllama-common.so.0 -Wl,--allow-shlib-undefined

# bankml's side of testing/oracle_peg.py (peg_load/save, peg_build_grammar, chat_peg_parse)
build/peg-driver: testing/peg_driver.c $(OBJ)
	@mkdir -p build
	$(CC) $(BASE) -O2 $(WARN) -o $@ testing/peg_driver.c $(OBJ) $(LDLIBS)
# Template caps against b11669's own jinja::caps_get (testing/oracle_template_caps.py); the kit side
# declares the two functions of common/chat.h it calls (std::string and std::map cross, nothing else).
build/kit-caps: testing/kit_caps.cpp $(ORACLE_INC)/ggml.h
	@mkdir -p build
	$(CXX_KIT) -std=c++17 -O2 -Wall -o $@ testing/kit_caps.cpp \
	    -L$(ORACLE_LIB) -l:libllama-common.so.0 -Wl,--allow-shlib-undefined

# bankml's side of testing/oracle_chat_gen.py (chat_analyze + chat_gen + peg_build_grammar)
build/chat-gen-driver: testing/chat_gen_driver.c $(OBJ)
	@mkdir -p build
	$(CC) $(BASE) -O2 $(WARN) -o $@ testing/chat_gen_driver.c $(OBJ) $(LDLIBS)
