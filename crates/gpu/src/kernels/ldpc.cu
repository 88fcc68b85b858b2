// 5G NR LDPC on the GPU: layered min-sum decoding and systematic encoding, one CTA per
// code block, one thread per lifting lane (blockDim.x >= Zc, rounded up to a warp).
//
// The lifted graph (columns and shifts of the active rows) and the encoder's solve
// order are uploaded by the host from radiohost-ldpc's own base-graph tables. The
// decoder reproduces radiohost-ldpc's integer arithmetic exactly (saturating int8
// a-posteriori LLRs, the same quantisation, min-sum correction in eighths or offset,
// saturated values passed on unchanged, early termination on a zero syndrome), so the
// decoded bits and iteration counts are identical to the CPU decoder's.
//
// Codeword positions (one byte per bit, column-major by Zc lanes): lane i of a row
// block with shift s touches bit (i + s) mod Zc of its column.

__device__ __forceinline__ int sat_i8(int v) { return max(-128, min(127, v)); }
// radiohost-ldpc's saturation: |a| >= 127 (absorbing).
__device__ __forceinline__ bool is_saturated(int a) { return abs(a) >= 127; }
// e_shift: the shift, with SINGLE_EDGE set on a row's single edge (its column has no
// other active row; its extrinsic value is the channel LLR), as in ldpc_graph.rs.
#define SINGLE_EDGE 0x4000
#define SHIFT_MASK 0x3fff
__device__ __forceinline__ int correct_magnitude(int m, int kind, int value) {
    if (kind == 1) return max(m - value, 0);  // offset
    int r = 0;                                // value/8 as shifts (radiohost-ldpc)
    if (value & 8) r = m;
    if (value & 4) r += m >> 1;
    if (value & 2) r += m >> 2;
    if (value & 1) r += m >> 3;
    return r;
}

// Codeword position of the t-th transmitted bit (rate matching of radiohost-ldpc:
// [2Zc, seg1_end) then [seg2_start, end)).
__device__ __forceinline__ int tx_position(int t, int two_z, int seg1_end, int seg2_start) {
    const int seg1_len = seg1_end - two_z;
    return t < seg1_len ? two_z + t : seg2_start + (t - seg1_len);
}

// Per row: lanes XOR the hard decisions of the row's blocks; true when all checks hold.
__device__ bool syndrome_ok(const signed char* app, const short* e_col, const short* e_shift,
                            const short* row_start, int rows, int zc) {
    bool fail = false;
    for (int r = 0; r < rows; ++r) {
        for (int i = threadIdx.x; i < zc; i += blockDim.x) {
            int x = 0;
            for (int e = row_start[r]; e < row_start[r + 1]; ++e) {
                int pos = i + (e_shift[e] & SHIFT_MASK);
                if (pos >= zc) pos -= zc;
                x ^= app[e_col[e] * zc + pos];
            }
            fail |= x < 0;
        }
    }
    return !__syncthreads_or(fail);
}

// grid.x = code blocks; llr[b * tx_bits + t] (float, positive = bit 0);
// bits_out[b * payload_bits + j]; status[b] = iterations | parity_ok << 16 | nan_seen << 17.
// c2v scratch: c2v[b * c2v_stride + e * zc + lane]. Dynamic shared memory: cols * zc bytes.
extern "C" __global__ void ldpc_decode(const float* __restrict__ llr, const short* __restrict__ e_col,
                                       const short* __restrict__ e_shift, const short* __restrict__ row_start,
                                       int rows, int zc, int cols, int payload_bits, int fillers, int tx_bits,
                                       int seg1_end, int seg2_start, float llr_scale, int corr_kind,
                                       int corr_value, int max_iterations, int early_termination,
                                       signed char* __restrict__ c2v_all, int c2v_stride,
                                       unsigned char* __restrict__ bits_out, int* __restrict__ status) {
    extern __shared__ signed char app[];
    const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
    const float* in = llr + (size_t)b * tx_bits;
    signed char* c2v = c2v_all + (size_t)b * c2v_stride;
    const int full = cols * zc;
    int nan_seen = 0;
    for (int p = tid; p < full; p += nt) app[p] = (p >= payload_bits && p < payload_bits + fillers) ? 127 : 0;
    __syncthreads();
    for (int t = tid; t < tx_bits; t += nt) {
        float x = in[t];
        if (isnan(x)) { nan_seen = 1; x = 0.0f; }
        const float v = fminf(fmaxf(x * llr_scale, -63.0f), 63.0f);
        // Half to even, as radiohost-ldpc's quantiser.
        app[tx_position(t, 2 * zc, seg1_end, seg2_start)] = (signed char)__float2int_rn(v);
    }
    nan_seen = __syncthreads_or(nan_seen);
    int iterations = 0;
    bool parity = false;
    while (iterations < max_iterations) {
        const bool first = iterations == 0;
        for (int r = 0; r < rows; ++r) {
            const int e0 = row_start[r], e1 = row_start[r + 1];
            for (int i = tid; i < zc; i += nt) {
                int min1 = 255, min2 = 255, sgn = 0;
                for (int e = e0; e < e1; ++e) {
                    const bool single = e_shift[e] & SINGLE_EDGE;
                    int pos = i + (e_shift[e] & SHIFT_MASK);
                    if (pos >= zc) pos -= zc;
                    const int a = app[e_col[e] * zc + pos];
                    // A single edge's t is its channel LLR, kept in its message slot.
                    const int t = first ? a
                                  : single ? c2v[e * zc + i]
                                  : (is_saturated(a) ? a : sat_i8(a - c2v[e * zc + i]));
                    const int m = abs(t);
                    min2 = min(min2, max(min1, m));
                    min1 = min(min1, m);
                    sgn ^= t;
                }
                const int m1 = correct_magnitude(min(min1, 127), corr_kind, corr_value);
                const int m2 = correct_magnitude(min(min2, 127), corr_kind, corr_value);
                // Lanes own distinct positions within a row, so t is recomputed from the
                // unchanged app value instead of being kept per edge.
                for (int e = e0; e < e1; ++e) {
                    const bool single = e_shift[e] & SINGLE_EDGE;
                    int pos = i + (e_shift[e] & SHIFT_MASK);
                    if (pos >= zc) pos -= zc;
                    signed char* ap = &app[e_col[e] * zc + pos];
                    const int a = *ap;
                    const int t = first ? a
                                  : single ? c2v[e * zc + i]
                                  : (is_saturated(a) ? a : sat_i8(a - c2v[e * zc + i]));
                    const int mag = abs(t) == min1 ? m2 : m1;
                    const int msg = ((t ^ sgn) < 0) ? -mag : mag;
                    c2v[e * zc + i] = (signed char)(single ? t : msg);
                    // A saturated t is final (absorbing), as in radiohost-ldpc.
                    *ap = (signed char)(is_saturated(t) ? t : sat_i8(t + msg));
                }
            }
            __syncthreads();
        }
        ++iterations;
        if (early_termination) {
            parity = syndrome_ok(app, e_col, e_shift, row_start, rows, zc);
            if (parity) break;
        }
    }
    if (!early_termination) parity = syndrome_ok(app, e_col, e_shift, row_start, rows, zc);
    unsigned char* out = bits_out + (size_t)b * payload_bits;
    for (int j = tid; j < payload_bits; j += nt) out[j] = app[j] < 0 ? 1 : 0;
    if (tid == 0) status[b] = iterations | (parity ? 1 << 16 : 0) | (nan_seen ? 1 << 17 : 0);
}

// grid.x = code blocks of one user's symbol. payload[b * payload_bits + j] (CRC attached);
// the solve steps come from the host plan: step s solves column step_col[s] as
// p[(i + step_shift[s]) mod Zc] = XOR over its entries (col, shift) of bit (i + shift) mod Zc.
// Output: the user's symbol bits out[p], p < symbol_bits: block b's rate-matched bits at
// b * tx_bits, zero padding after the blocks, all XORed with the scrambling sequence.
// Dynamic shared memory: cols * zc bytes.
extern "C" __global__ void ldpc_encode(const unsigned char* __restrict__ payload, int payload_bits,
                                       const short* __restrict__ step_col, const short* __restrict__ step_shift,
                                       const short* __restrict__ entry_start, const short* __restrict__ entry_col,
                                       const short* __restrict__ entry_shift, int steps, int zc, int cols,
                                       int tx_bits, int seg1_end, int seg2_start,
                                       const unsigned* __restrict__ scramble, int symbol_bits,
                                       unsigned char* __restrict__ out) {
    extern __shared__ unsigned char cw[];
    const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
    const unsigned char* in = payload + (size_t)b * payload_bits;
    const int full = cols * zc;
    for (int p = tid; p < full; p += nt) cw[p] = p < payload_bits ? (in[p] & 1) : 0;
    __syncthreads();
    for (int s = 0; s < steps; ++s) {
        const int col = step_col[s], shift = step_shift[s];
        for (int i = tid; i < zc; i += nt) {
            int acc = 0;
            for (int e = entry_start[s]; e < entry_start[s + 1]; ++e) {
                int pos = i + entry_shift[e];
                if (pos >= zc) pos -= zc;
                acc ^= cw[entry_col[e] * zc + pos];
            }
            int dst = i + shift;
            if (dst >= zc) dst -= zc;
            cw[col * zc + dst] = (unsigned char)acc;
        }
        __syncthreads();
    }
    for (int t = tid; t < tx_bits; t += nt) {
        const int p = b * tx_bits + t;
        const unsigned c = (scramble[p >> 5] >> (p & 31)) & 1u;
        out[p] = cw[tx_position(t, 2 * zc, seg1_end, seg2_start)] ^ (unsigned char)c;
    }
    if (b == 0) {  // padding after the last block carries the bare sequence
        for (int p = gridDim.x * tx_bits + tid; p < symbol_bits; p += nt)
            out[p] = (unsigned char)((scramble[p >> 5] >> (p & 31)) & 1u);
    }
}
