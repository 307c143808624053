/*
 * kvq.c -- the KV cache's row types (see kvq.h): their table, the row
 * writers ggml's set_rows uses, the readers, the query conversion and dot
 * products of flash attention, and the Hadamard rotation.
 */
#pragma GCC optimize("fp-contract=off")

#include "ops/kvq.h"

#include <math.h>
#include <string.h>

#include "ops/f16.h"
#include "ops/iq4.h"
#include "ops/q4_0.h"
#include "ops/q8_0.h"

static const kvq_info kvq_table[KVQ_COUNT] = {
    [KVQ_F16] = {"f16", 1, 1, 2, 0},
    [KVQ_F32] = {"f32", 0, 1, 4, 0},
    [KVQ_BF16] = {"bf16", 30, 1, 2, 0},
    [KVQ_Q8_0] = {"q8_0", 8, 32, 34, 1},
    [KVQ_Q4_0] = {"q4_0", 2, 32, 18, 1},
    [KVQ_Q4_1] = {"q4_1", 3, 32, 20, 1},
    [KVQ_IQ4_NL] = {"iq4_nl", 20, 32, 18, 1},
    [KVQ_Q5_0] = {"q5_0", 6, 32, 22, 1},
    [KVQ_Q5_1] = {"q5_1", 7, 32, 24, 1},
};
/* llama-server's list order (common/arg.cpp's kv_cache_types) */
static const kvq_type kvq_order[KVQ_COUNT] = {KVQ_F32, KVQ_F16, KVQ_BF16, KVQ_Q8_0, KVQ_Q4_0,
                                              KVQ_Q4_1, KVQ_IQ4_NL, KVQ_Q5_0, KVQ_Q5_1};

const kvq_info *kvq_info_of(kvq_type t)
{
    return (unsigned)t < KVQ_COUNT ? &kvq_table[t] : NULL;
}

int kvq_parse(const char *name, kvq_type *t)
{
    for (int i = 0; name && i < KVQ_COUNT; i++)
        if (!strcmp(name, kvq_table[i].name)) {
            *t = (kvq_type)i;
            return 0;
        }
    return -1;
}

int kvq_of_ggml(uint32_t ggml)
{
    for (int i = 0; i < KVQ_COUNT; i++)
        if (kvq_table[i].ggml == ggml) return i;
    return -1;
}

const char *kvq_names(void)
{
    static char buf[96];
    if (!buf[0]) {
        size_t o = 0;
        for (int i = 0; i < KVQ_COUNT; i++) {
            const char *n = kvq_table[kvq_order[i]].name;
            size_t l = strlen(n);
            if (i) { memcpy(buf + o, ", ", 2); o += 2; }
            memcpy(buf + o, n, l);
            o += l;
        }
        buf[o] = 0;
    }
    return buf;
}

size_t kvq_row_bytes(kvq_type t, size_t n)
{
    const kvq_info *in = kvq_info_of(t);
    if (!in || n % in->blk) return 0;
    return n / in->blk * in->bytes;
}

/* ---- ggml-base's reference quantizers (quantize_row_*_ref) ---- */

static void kvq_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* gcc's float -> int8_t: cvttss2si, the low byte kept */
static int kvq_i8(float f) { return (int8_t)(int32_t)f; }

/* q4_0 (off 8, top 15) and q5_0 (off 16, top 31): d = max / -off of the
 * largest magnitude's signed value, q = min(top, (int8_t)(x*id + off + 0.5)). */
static void kvq_quant_sym(const float *x, uint8_t *y, size_t nb, int five)
{
    const float off = five ? 16.0f : 8.0f, half = five ? 16.5f : 8.5f;
    const int top = five ? 31 : 15;
    for (size_t i = 0; i < nb; i++, x += 32) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = max / -off;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        kvq_put16(y, f32_to_f16(d));
        uint32_t qh = 0;
        uint8_t *qs = y + (five ? 6 : 2);
        for (int j = 0; j < 16; j++) {
            int a = kvq_i8(x[j] * id + half), b = kvq_i8(x[16 + j] * id + half);
            uint8_t q0 = (uint8_t)(a < top ? a : top), q1 = (uint8_t)(b < top ? b : top);
            qs[j] = (uint8_t)((q0 & 0x0F) | (q1 & 0x0F) << 4);
            qh |= (uint32_t)((q0 & 0x10u) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10u) >> 4) << (j + 16);
        }
        if (five) memcpy(y + 2, &qh, 4);
        y += five ? Q5_0_BYTES : Q4_0_BYTES;
    }
}

/* q4_1 (15 steps) and q5_1 (31): d = (max - min) / steps, m = min,
 * q = (int8_t)((x - min)*id + 0.5) (q4_1 capped at 15; q5_1 as uint8_t). */
static void kvq_quant_asym(const float *x, uint8_t *y, size_t nb, int five)
{
    for (size_t i = 0; i < nb; i++, x += 32) {
        float min = 3.40282347e+38f, max = -3.40282347e+38f;
        for (int j = 0; j < 32; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / (five ? 31.0f : 15.0f);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        kvq_put16(y, f32_to_f16(d));
        kvq_put16(y + 2, f32_to_f16(min));
        uint32_t qh = 0;
        uint8_t *qs = y + (five ? 8 : 4);
        for (int j = 0; j < 16; j++) {
            const float x0 = (x[j] - min) * id + 0.5f, x1 = (x[16 + j] - min) * id + 0.5f;
            uint8_t q0, q1;
            if (five) {
                q0 = (uint8_t)(int32_t)x0;
                q1 = (uint8_t)(int32_t)x1;
            } else {
                int a = kvq_i8(x0), b = kvq_i8(x1);
                q0 = (uint8_t)(a < 15 ? a : 15);
                q1 = (uint8_t)(b < 15 ? b : 15);
            }
            qs[j] = (uint8_t)((q0 & 0x0F) | (q1 & 0x0F) << 4);
            qh |= (uint32_t)((q0 & 0x10u) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10u) >> 4) << (j + 16);
        }
        if (five) memcpy(y + 4, &qh, 4);
        y += five ? Q5_1_BYTES : Q4_1_BYTES;
    }
}

/* The nearest of the 16 iq4_nl values to x (ggml's best_index_int8: a
 * binary search, a tie going to the upper value). */
static int kvq_iq4_index(const int8_t *val, float x)
{
    if (x <= (float)val[0]) return 0;
    if (x >= (float)val[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < (float)val[mid]) hi = mid;
        else lo = mid;
    }
    return x - (float)val[hi - 1] < (float)val[hi] - x ? hi - 1 : hi;
}

/* iq4_nl: ggml-base's quantize_row_iq4_nl_ref, which runs
 * quantize_row_iq4_nl_impl with no importance weights and ntry = -1, so no
 * scale is searched: per block of 32, the largest magnitude's signed value
 * max, codes of x * (1 / (max / -127)), then d = sum(w q x) / sum(w q q) with
 * w = x * x (SSE, in order, no FMA), stored as f16. A block whose largest
 * magnitude is below 1e-15 gets d = 0 and keeps the codes the previous block
 * of the row left in ggml's array (its first block: whatever the stack held;
 * zeros here). */
static void kvq_quant_iq4nl(const float *x, uint8_t *y, size_t nb)
{
    const int8_t *val = iq4_values();
    uint8_t L[32] = {0};
    for (size_t i = 0; i < nb; i++, x += 32, y += IQ4_NL_BYTES) {
        float amax = 0.0f, max = 0.0f, d = 0.0f;
        for (int j = 0; j < 32; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        if (amax >= 1e-15f) {
            const float id = 1.0f / (max / (float)val[0]);
            float sumqx = 0.0f, sumq2 = 0.0f;
            for (int j = 0; j < 32; j++) {
                L[j] = (uint8_t)kvq_iq4_index(val, id * x[j]);
                const float q = (float)val[L[j]], w = x[j] * x[j];
                sumqx += w * q * x[j];
                sumq2 += w * q * q;
            }
            d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
        }
        kvq_put16(y, f32_to_f16(d));
        for (int j = 0; j < 16; j++) y[2 + j] = (uint8_t)(L[j] | L[16 + j] << 4);
    }
}

void kvq_from_float(kvq_type t, const float *x, uint8_t *y, size_t n)
{
    switch (t) {
    case KVQ_F32: memcpy(y, x, n * sizeof(float)); break;
    case KVQ_F16: f32_to_f16_row(x, (uint16_t *)(void *)y, n); break;
    case KVQ_BF16: f32_to_bf16_row(x, (uint16_t *)(void *)y, n); break;
    case KVQ_Q8_0: q8_0_quantize_blocks(x, y, n / 32); break;
    case KVQ_Q4_0: kvq_quant_sym(x, y, n / 32, 0); break;
    case KVQ_Q5_0: kvq_quant_sym(x, y, n / 32, 1); break;
    case KVQ_Q4_1: kvq_quant_asym(x, y, n / 32, 0); break;
    case KVQ_Q5_1: kvq_quant_asym(x, y, n / 32, 1); break;
    case KVQ_IQ4_NL: kvq_quant_iq4nl(x, y, n / 32); break;
    default: memset(y, 0, kvq_row_bytes(t, n)); break;   /* not a cache type */
    }
}

void kvq_to_float(kvq_type t, const uint8_t *x, float *y, size_t n)
{
    const size_t len = kvq_row_bytes(t, n);
    switch (t) {
    case KVQ_F32: memcpy(y, x, n * sizeof(float)); break;
    case KVQ_F16: f16_to_f32_row((const uint16_t *)(const void *)x, y, n); break;
    case KVQ_BF16: bf16_to_f32_row((const uint16_t *)(const void *)x, y, n); break;
    case KVQ_Q8_0: q8_0_dequantize(x, len, n, y, NULL, 0); break;
    case KVQ_Q4_0: q4_0_dequantize(x, len, n, y, NULL, 0); break;
    case KVQ_Q4_1: q4_1_dequantize(x, len, n, y, NULL, 0); break;
    case KVQ_Q5_0: q5_0_dequantize(x, len, n, y, NULL, 0); break;
    case KVQ_Q5_1: q5_1_dequantize(x, len, n, y, NULL, 0); break;
    case KVQ_IQ4_NL: iq4_nl_dequantize(x, len, n, y, NULL, 0); break;
    default: memset(y, 0, n * sizeof *y); break;
    }
}

/* ---- the query's side ---- */

size_t kvq_q_bytes(kvq_type t, size_t n)
{
    switch (t) {
    case KVQ_Q8_0: case KVQ_Q4_0: case KVQ_Q5_0: case KVQ_IQ4_NL: return q8_0_row_bytes(n);
    case KVQ_Q4_1: case KVQ_Q5_1: return q8_1_row_bytes(n);
    default: return n * sizeof(float);   /* float types: the rounded query as floats */
    }
}

void kvq_q_convert(kvq_type t, const float *q, uint8_t *out, size_t n)
{
    switch (t) {
    case KVQ_Q8_0: case KVQ_Q4_0: case KVQ_Q5_0: case KVQ_IQ4_NL: q8_0_quantize_blocks(q, out, n / 32); break;
    case KVQ_Q4_1: case KVQ_Q5_1: q8_1_quantize_blocks(q, out, n / 32); break;
    case KVQ_F32: f16_round_act(F16_T_F32, q, (float *)(void *)out, n); break;
    case KVQ_BF16: f16_round_act(F16_T_BF16, q, (float *)(void *)out, n); break;
    default: f16_round_act(F16_T_F16, q, (float *)(void *)out, n); break;
    }
}

float kvq_dot(kvq_type t, const uint8_t *k, const uint8_t *q, size_t n)
{
    switch (t) {
    case KVQ_Q8_0: return q8_0_vec_dot(k, q, n / 32);
    case KVQ_Q4_0: return q4_0_vec_dot(k, q, n / 32);
    case KVQ_Q4_1: return q4_1_vec_dot(k, q, n / 32);
    case KVQ_Q5_0: return q5_0_vec_dot(k, q, n / 32);
    case KVQ_Q5_1: return q5_1_vec_dot(k, q, n / 32);
    case KVQ_IQ4_NL: return iq4_nl_vec_dot(k, q, n / 32);
    case KVQ_F32: return f16_vec_dot(F16_T_F32, k, (const float *)(const void *)q, n);
    case KVQ_BF16: return f16_vec_dot(F16_T_BF16, k, (const float *)(const void *)q, n);
    case KVQ_F16: return f16_vec_dot(F16_T_F16, k, (const float *)(const void *)q, n);
    default: return 0.0f;
    }
}

/* ---- the rotation ---- */

size_t kvq_rot_k(kvq_type tk, size_t head_k, int disabled)
{
    const kvq_info *in = kvq_info_of(tk);
    if (disabled || !in || !in->quantized || head_k == 0 || head_k % 64) return 0;
    size_t n = 64;
    while (head_k % (n * 2) == 0) n *= 2;
    return n;
}

size_t kvq_rot_v(kvq_type tv, size_t head_v, int disabled)
{
    const kvq_info *in = kvq_info_of(tv);
    if (disabled || !in || !in->quantized || head_v == 0 || head_v % 64) return 0;
    return 64;
}

void kvq_fwht(float *x, size_t total, size_t n)
{
    const float scale = 1.0f / sqrtf((float)n);
    for (size_t r = 0; r + n <= total; r += n) {
        float *row = x + r;
        for (size_t j = 0; j < n; j++) row[j] = row[j] * scale;
        for (size_t len = 1; len < n; len <<= 1)
            for (size_t i = 0; i < n; i += 2 * len)
                for (size_t j = 0; j < len; j++) {
                    const float u = row[i + j], v = row[i + len + j];
                    row[i + j] = u + v;
                    row[i + len + j] = u - v;
                }
    }
}
