/* ftype.h -- the file type name llama.cpp gives a GGUF (`llama_ftype_name`).
 *
 * llama-server reports it as /props's model_ftype and in /v1/models' meta:
 * general.file_type when the file says it, else a guess from the tensor type
 * most tensors have ("(guessed) all F32"). */
#ifndef BANKML_FTYPE_H
#define BANKML_FTYPE_H

#include "file/gguf.h"

/* llama_ftype_name of h's file type: general.file_type when it is a u32
 * (a value llama.cpp has no name for: "unknown, may not work"; with bit 1024
 * set: "(guessed) " first), else the guess from the tensor table, walked in
 * llama_model_loader's order (layer number of "blk.N.", then name; the first
 * type to reach the highest count wins), "(guessed) " first. A static
 * string. */
const char *gguf_ftype_name(const gguf_header *h);

#endif
