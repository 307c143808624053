/*
 * chat_spec.c -- chat_gen_specialized (chat_gen.h): which of b11669's
 * common_chat_params_init_<name> (common/parsers/<name>.cpp) a template takes,
 * each init in chat_spec_<name>.c over the helpers of chat_spec_util.c
 * (chat_spec_int.h); builder calls follow GCC's creation order as in
 * chat_gen.c (in `x + y` y first; a string operand's literal inside the
 * operator, after the parser beside it).
 */
#include "text/chat_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_gen_int.h"
#include "text/chat_spec_int.h"

int chat_gen_specialized(ca_specialized s, const char *tmpl, size_t len, const chat_gen_inputs *in,
                         chat_gen_params *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    peg_init(&out->arena);
    out->format = CHAT_FORMAT_PEG_NATIVE;
    csp_ctx c = {tmpl, len, in, out, err, errlen, 0};
    int rc;
    if (!(out->generation_prompt = csp_strdup(&c, in->generation_prompt ? in->generation_prompt : "",
                                              in->generation_prompt ? in->generation_prompt_len : 0)))
        return CHAT_GEN_ERROR;
    out->generation_prompt_len = in->generation_prompt ? in->generation_prompt_len : 0;
    switch (s) {
    case CA_SPEC_QWEN3_CODER: rc = chat_spec_qwen3_coder(&c); break;
    case CA_SPEC_MINISTRAL_3: rc = chat_spec_ministral_3(&c); break;
    case CA_SPEC_GPT_OSS: rc = chat_spec_gpt_oss(&c); break;
    case CA_SPEC_FUNCTIONARY_V3_2: rc = chat_spec_functionary_v3_2(&c); break;
    case CA_SPEC_KIMI_K2: rc = chat_spec_kimi_k2(&c); break;
    case CA_SPEC_DEEPSEEK_V3_2: rc = chat_spec_deepseek_v3_2(&c); break;
    case CA_SPEC_GEMMA4:
    case CA_SPEC_GEMMA4_OUTDATED: rc = chat_spec_gemma4(&c); break;
    case CA_SPEC_GIGACHAT_V3: rc = chat_spec_gigachat_v3(&c); break;
    case CA_SPEC_COHERE2MOE: rc = chat_spec_cohere2moe(&c); break;
    case CA_SPEC_MUSE_GLIMMER: rc = chat_spec_muse_glimmer(&c); break;
    case CA_SPEC_KIMI_K3: rc = chat_spec_kimi_k3(&c); break;
    case CA_SPEC_LING3: rc = chat_spec_ling3(&c); break;
    case CA_SPEC_MINICPM5: rc = chat_spec_minicpm5(&c); break;
    case CA_SPEC_LFM2: rc = chat_spec_lfm2(&c, 1); break;
    case CA_SPEC_LFM2_5: rc = chat_spec_lfm2(&c, 0); break;
    case CA_SPEC_MINIMAX_M3: rc = chat_spec_minimax_m3(&c); break;
    case CA_SPEC_TRANSLATE_GEMMA: rc = chat_spec_translate_gemma(&c); break;
    case CA_SPEC_K2_HORIZON: rc = chat_spec_k2_horizon(&c); break;
    case CA_SPEC_LLM_JP_HARMONY: rc = chat_spec_llm_jp_harmony(&c); break;
    case CA_SPEC_NONE:
        snprintf(err, errlen, "the template takes no specialised parser: chat_gen builds its parser");
        return CHAT_GEN_ERROR;
    default:
        snprintf(err, errlen, "no specialised chat parser of b11669 has the number %d", (int)s);
        return CHAT_GEN_UNSUPPORTED;
    }
    if (rc == CHAT_GEN_OK && out->arena.oom) { snprintf(err, errlen, "out of memory"); return CHAT_GEN_ERROR; }
    return rc;
}
