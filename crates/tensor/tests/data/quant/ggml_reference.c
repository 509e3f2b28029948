// Command-line front end to ggml's own reference code, used by make_quant_goldens.py
// (--ggml-src) to write the goldens under ggml/. Not part of the build or the tests.
//
// Build (the script does this): cc -O2 -ffp-contract=off -std=gnu11 -I GGML/include
//   -I GGML/src -I GGML/src/ggml-cpu ggml_reference.c GGML/src/ggml-quants.c
//   GGML/src/ggml-cpu/quants.c -lm
// -ffp-contract=off keeps a*b+c from fusing into an FMA, as on x86-64 builds of
// ggml-base; K-quant level choices can differ in rare ties when the compiler fuses.
//
//   ggml_reference q TYPE in.f32 out.bin      quantize_row_TYPE_ref (quantize_TYPE for the
//                                             IQ4 formats, as llama-quantize calls them)
//   ggml_reference v W_A ROWS N w.bin a.bin out.f32
//                                             ggml_vec_dot_W_A_generic per row of N values
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-impl.h"
#include "ggml-quants.h"
#include "ggml.h"

// The few ggml symbols the two source files reference outside the code we call.
float ggml_table_f32_f16[1 << 16];
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    (void) fmt;
    fprintf(stderr, "ggml_abort at %s:%d\n", file, line);
    abort();
}
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void) type; (void) ne; abort(); }
const char * ggml_type_name(enum ggml_type type) { (void) type; return "?"; }
size_t ggml_type_size(enum ggml_type type) { (void) type; abort(); }

typedef void (*vec_dot_fn)(int, float *, size_t, const void *, size_t, const void *, size_t, int);
#define DECLARE_DOT(name) \
    void ggml_vec_dot_##name##_generic(int, float *, size_t, const void *, size_t, const void *, size_t, int);
DECLARE_DOT(q4_0_q8_0) DECLARE_DOT(q4_1_q8_1) DECLARE_DOT(q5_0_q8_0) DECLARE_DOT(q5_1_q8_1)
DECLARE_DOT(q8_0_q8_0) DECLARE_DOT(q2_K_q8_K) DECLARE_DOT(q3_K_q8_K) DECLARE_DOT(q4_K_q8_K)
DECLARE_DOT(q5_K_q8_K) DECLARE_DOT(q6_K_q8_K)
DECLARE_DOT(iq2_xxs_q8_K) DECLARE_DOT(iq2_xs_q8_K) DECLARE_DOT(iq2_s_q8_K) DECLARE_DOT(iq3_xxs_q8_K)
DECLARE_DOT(iq3_s_q8_K) DECLARE_DOT(iq1_s_q8_K) DECLARE_DOT(iq1_m_q8_K) DECLARE_DOT(iq4_nl_q8_0)
DECLARE_DOT(iq4_xs_q8_K) DECLARE_DOT(tq1_0_q8_K) DECLARE_DOT(tq2_0_q8_K)

static void * read_file(const char * path, long * len) {
    FILE * f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void * buf = malloc(*len > 0 ? *len : 1);
    if (fread(buf, 1, *len, f) != (size_t) *len) { perror(path); exit(1); }
    fclose(f);
    return buf;
}

static void write_file(const char * path, const void * buf, size_t len) {
    FILE * f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len) { perror(path); exit(1); }
    fclose(f);
}

static int quantize(const char * type, const char * in, const char * out) {
    long len;
    const float * x = read_file(in, &len);
    const int64_t k = len / 4;
    void * y = malloc(2 * len + 1024);
    size_t bytes = 0;
#define QUANTIZE(name, block, qk) \
    if (!strcmp(type, #name)) { quantize_row_##name##_ref(x, y, k); bytes = k / qk * sizeof(block); }
    QUANTIZE(q4_0, block_q4_0, 32) QUANTIZE(q4_1, block_q4_1, 32) QUANTIZE(q5_0, block_q5_0, 32)
    QUANTIZE(q5_1, block_q5_1, 32) QUANTIZE(q8_0, block_q8_0, 32) QUANTIZE(q8_1, block_q8_1, 32)
    QUANTIZE(q2_K, block_q2_K, 256) QUANTIZE(q3_K, block_q3_K, 256) QUANTIZE(q4_K, block_q4_K, 256)
    QUANTIZE(q5_K, block_q5_K, 256) QUANTIZE(q6_K, block_q6_K, 256) QUANTIZE(q8_K, block_q8_K, 256)
    QUANTIZE(tq1_0, block_tq1_0, 256) QUANTIZE(tq2_0, block_tq2_0, 256)
    // What llama-quantize writes without an importance matrix (ggml_quantize_chunk): the
    // IQ4 formats' seven-try scale search, not quantize_row_iq4_nl_ref's single try.
#define QUANTIZE_CHUNK(name, block, qk) \
    if (!strcmp(type, #name)) { quantize_##name(x, y, 1, k, NULL); bytes = k / qk * sizeof(block); }
    QUANTIZE_CHUNK(iq4_nl, block_iq4_nl, 32) QUANTIZE_CHUNK(iq4_xs, block_iq4_xs, 256)
    if (!bytes) { fprintf(stderr, "unknown type %s\n", type); return 1; }
    write_file(out, y, bytes);
    return 0;
}

static int vec_dot(const char * pair, long rows, int n, const char * w_path, const char * a_path,
                   const char * out) {
    vec_dot_fn fn = NULL;
#define PAIR(name) if (!strcmp(pair, #name)) fn = ggml_vec_dot_##name##_generic;
    PAIR(q4_0_q8_0) PAIR(q4_1_q8_1) PAIR(q5_0_q8_0) PAIR(q5_1_q8_1) PAIR(q8_0_q8_0)
    PAIR(q2_K_q8_K) PAIR(q3_K_q8_K) PAIR(q4_K_q8_K) PAIR(q5_K_q8_K) PAIR(q6_K_q8_K)
    PAIR(iq2_xxs_q8_K) PAIR(iq2_xs_q8_K) PAIR(iq2_s_q8_K) PAIR(iq3_xxs_q8_K) PAIR(iq3_s_q8_K)
    PAIR(iq1_s_q8_K) PAIR(iq1_m_q8_K) PAIR(iq4_nl_q8_0) PAIR(iq4_xs_q8_K) PAIR(tq1_0_q8_K)
    PAIR(tq2_0_q8_K)
    if (!fn || rows <= 0) { fprintf(stderr, "unknown pair %s or bad row count\n", pair); return 1; }
    long w_len, a_len;
    const char * w = read_file(w_path, &w_len);
    const char * a = read_file(a_path, &a_len);
    float * dots = malloc(rows * sizeof(float));
    for (long r = 0; r < rows; r++) {
        fn(n, &dots[r], 0, w + r * (w_len / rows), 0, a + r * (a_len / rows), 0, 1);
    }
    write_file(out, dots, rows * sizeof(float));
    return 0;
}

int main(int argc, char ** argv) {
    for (int i = 0; i < (1 << 16); i++) {
        ggml_table_f32_f16[i] = ggml_compute_fp16_to_fp32((ggml_fp16_t) i);
    }
    if (argc == 5 && !strcmp(argv[1], "q")) return quantize(argv[2], argv[3], argv[4]);
    if (argc == 8 && !strcmp(argv[1], "v")) {
        return vec_dot(argv[2], atol(argv[3]), atoi(argv[4]), argv[5], argv[6], argv[7]);
    }
    fprintf(stderr, "usage: %s q TYPE in.f32 out.bin | v W_A ROWS N w.bin a.bin out.f32\n", argv[0]);
    return 2;
}
