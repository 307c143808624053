# oracle.mk -- make targets of the oracle kit (included by the Makefile; paths from the repository root).
#
#   make models          the small random-weight test models into build/models (incremental: a no-op when
#                        they exist and testing/make_models.py and llama-quantize are unchanged)
#   make quant-models    llama-quantize's mixes (Q4_K_M, Q5_K_M, Q6_K, Q4_0, ...) into build/quant-models
#   make bench-models    the big shapes (SmolLM2-135M F16, Bonsai-1.7B Q1_0/Q2_0) into build/bench-models
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

.PHONY: models quant-models bench-models models-sha256

# A whole model in libllama with every graph tensor written as raw bits (see testing/kit_llama_dump.c).
build/kit-llama-dump: testing/kit_llama_dump.c $(ORACLE_INC)/ggml.h
	@mkdir -p build
	$(CC) -std=gnu11 -D_GNU_SOURCE -O2 $(WARN) -I$(ORACLE_INC) -o $@ testing/kit_llama_dump.c \
	    -L$(ORACLE_LIB) -l:libllama.so.0 -l:libggml.so.0 -l:libggml-base.so.0 -lm -Wl,--allow-shlib-undefined
