// MIMO kernels: channel estimation, zero-forcing, fused equalisation + soft
// demodulation (+ descrambling), modulation and precoding.
//
// Layouts follow radiohost-phy: CSI and detector per data subcarrier i as
// csi[(i*K + k)*M + m] (M x K column-major channel, K x M row-major detector);
// frequency-domain symbols [antenna][data_num]; user streams [user][data_num].

// Channel estimate of subcarriers [i0, i0 + len) for every user and antenna from
// `pilot_syms` received pilot symbols (pilot_freq[j][m][data_num]); mirrors
// phy::csi::CsiEstimator::estimate. layout: 0 = frequency-orthogonal, 1 = time-orthogonal.
__device__ float2 pilot_ls(const float2* __restrict__ pilot_freq, const float2* __restrict__ pilots,
                           int pilot_syms, int layout, int M, int K, int D, int i, int k, int m) {
    float2 acc = make_float2(0.0f, 0.0f);
    int count = 0;
    for (int j = 0; j < pilot_syms; ++j) {
        if (layout == 1 && j % K != k) continue;
        acc = cadd(acc, cmulc(pilots[i], pilot_freq[((size_t)j * M + m) * D + i]));
        ++count;
    }
    if (layout == 1) return cscale(acc, 1.0f / (float)max(count, 1));
    return cscale(acc, 1.0f / (float)pilot_syms);
}

extern "C" __global__ void csi_estimate(const float2* __restrict__ pilot_freq, const float2* __restrict__ pilots,
                                        int pilot_syms, int layout, int M, int K, int D, int i0, int len,
                                        float2* __restrict__ csi) {
    // Grid-stride: the host caps the grid at one CTA per subcarrier of the part, so the
    // Zf instruction's SM need is set by zf_detect, not by this short kernel.
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < len * K * M; idx += gridDim.x * blockDim.x) {
    const int m = idx % M;
    const int k = (idx / M) % K;
    const int i = i0 + idx / (M * K);
    float2 h;
    if (layout == 1 || i % K == k) {
        h = pilot_ls(pilot_freq, pilots, pilot_syms, layout, M, K, D, i, k, m);
    } else {
        // Linear interpolation between user k's comb pilots, edges held (phy::csi).
        const int last = k + (D - 1 - k) / K * K;
        int lo, hi;
        float t;
        if (i < k) { lo = k; hi = k; t = 0.0f; }
        else if (i > last) { lo = last; hi = last; t = 0.0f; }
        else { lo = i - (i - k) % K; hi = lo + K; t = (float)(i - lo) / (float)K; }
        const float2 a = pilot_ls(pilot_freq, pilots, pilot_syms, layout, M, K, D, lo, k, m);
        const float2 b = pilot_ls(pilot_freq, pilots, pilot_syms, layout, M, K, D, hi, k, m);
        h = cadd(a, cscale(csub(b, a), t));
    }
    csi[((size_t)i * K + k) * M + m] = h;
    }
}

// Zero-forcing of subcarriers [i0, i0 + gridDim.x): one CTA per subcarrier.
// W = (H^H H)^-1 H^H through Cholesky G = L L^H (right-looking, in shared memory), the
// triangular inverse X = L^-1 (one thread per column) and G^-1 = X^H X.
// noise_gain[i*K + k] = [G^-1]_kk. status[i] = 0, or 1 + the user whose pivot failed
// (the same test as phy::zf). Block 0 of every launch also writes the noise estimate
// noise[0] = sum(null_energy[0..n_null]) * inv_null_bins.
// Dynamic shared memory: 2*K*K float2 + K float + 1 int.
extern "C" __global__ void zf_detect(const float2* __restrict__ csi, int M, int K, int i0,
                                     float2* __restrict__ w, float* __restrict__ noise_gain,
                                     int* __restrict__ status, const float* __restrict__ null_energy,
                                     int n_null, float inv_null_bins, float* __restrict__ noise) {
    extern __shared__ float2 zf_smem[];
    float2* A = zf_smem;            // G, then L (lower), then G^-1 (full)
    float2* X = zf_smem + K * K;    // L^-1 (lower)
    float* energy = (float*)(X + K * K);
    int* failed = (int*)(energy + K);
    const int i = i0 + blockIdx.x;
    const float2* h = csi + (size_t)i * K * M;  // h[k*M + m]
    const int tid = threadIdx.x, nt = blockDim.x;

    if (blockIdx.x == 0) {  // every part writes the same value: no cross-part dependence
        float e = 0.0f;
        for (int t = tid; t < n_null; t += nt) e += null_energy[t];
        e = block_sum(e);
        if (tid == 0) noise[0] = e * inv_null_bins;
    }
    if (tid == 0) *failed = 0;
    // Gram matrix, lower triangle: G[r][c] = sum_m conj(h_r[m]) h_c[m].
    for (int idx = tid; idx < K * K; idx += nt) {
        const int r = idx / K, c = idx % K;
        if (c > r) continue;
        float2 g = make_float2(0.0f, 0.0f);
        for (int m = 0; m < M; ++m) g = cadd(g, cmulc(h[r * M + m], h[c * M + m]));
        A[idx] = g;
        if (r == c) energy[r] = g.x;
    }
    for (int j = 0; j < K; ++j) {
        __syncthreads();
        if (tid == 0 && *failed == 0) {
            const float d = A[j * K + j].x;
            const float floor_ = 1.1920929e-7f * 16.0f * fmaxf(energy[j], 1.17549435e-38f);
            if (isnan(d) || d <= floor_) {
                *failed = j + 1;
            } else {
                A[j * K + j] = make_float2(sqrtf(d), 0.0f);
            }
        }
        __syncthreads();
        if (*failed) {
            if (tid == 0) status[i] = *failed;
            return;
        }
        const float inv = 1.0f / A[j * K + j].x;
        for (int r = j + 1 + tid; r < K; r += nt) A[r * K + j] = cscale(A[r * K + j], inv);
        __syncthreads();
        const int rest = K - j - 1;
        for (int idx = tid; idx < rest * rest; idx += nt) {
            const int r = j + 1 + idx / rest, c = j + 1 + idx % rest;
            if (c > r) continue;
            // A[r][c] -= L[r][j] conj(L[c][j])
            const float2 lr = A[r * K + j], lc = A[c * K + j];
            A[r * K + c] = csub(A[r * K + c], cmul(lr, make_float2(lc.x, -lc.y)));
        }
    }
    __syncthreads();
    // X = L^-1, column c by thread c: forward substitution on e_c.
    for (int c = tid; c < K; c += nt) {
        X[c * K + c] = make_float2(1.0f / A[c * K + c].x, 0.0f);
        for (int r = c + 1; r < K; ++r) {
            float2 s = make_float2(0.0f, 0.0f);
            for (int p = c; p < r; ++p) s = cadd(s, cmul(A[r * K + p], X[p * K + c]));
            X[r * K + c] = cscale(s, -1.0f / A[r * K + r].x);
        }
    }
    __syncthreads();
    // G^-1 = X^H X into A: Ginv[a][b] = sum_{p >= max(a,b)} conj(X[p][a]) X[p][b].
    for (int idx = tid; idx < K * K; idx += nt) {
        const int a = idx / K, b = idx % K;
        float2 s = make_float2(0.0f, 0.0f);
        for (int p = max(a, b); p < K; ++p) s = cadd(s, cmulc(X[p * K + a], X[p * K + b]));
        A[idx] = s;
    }
    __syncthreads();
    // W[k][m] = sum_j Ginv[k][j] conj(h_j[m]).
    float2* wi = w + (size_t)i * K * M;
    for (int idx = tid; idx < K * M; idx += nt) {
        const int k = idx / M, m = idx % M;
        float2 s = make_float2(0.0f, 0.0f);
        for (int j = 0; j < K; ++j) {
            const float2 hj = h[j * M + m];
            s = cadd(s, cmul(A[k * K + j], make_float2(hj.x, -hj.y)));
        }
        wi[idx] = s;
    }
    for (int k = tid; k < K; k += nt) noise_gain[(size_t)i * K + k] = A[k * K + k].x;
    if (tid == 0) status[i] = 0;
}

// Equalise and soft-demodulate subcarriers [i0, i0 + len) of one uplink symbol for all
// users; one thread per (subcarrier, user). y[m][D] is the symbol's FFT output.
// Max-log LLRs per axis over the PAM levels (phy::qam::Demodulator, exact), scaled by
// 1 / max(noise * noise_gain, 1e-12); LLR bit position i*qm + 2*b + axis. The first
// `descramble_len` LLRs of the user's symbol are sign-flipped where the user's
// scrambling sequence (scramble[k * seq_words + p/32] bit p%32) is one.
// llr[k * llr_stride + p].
extern "C" __global__ void eq_demod(const float2* __restrict__ y, const float2* __restrict__ w,
                                    const float* __restrict__ noise_gain, const float* __restrict__ noise,
                                    int M, int K, int D, int i0, int len, const float* __restrict__ levels,
                                    int qa, const unsigned* __restrict__ scramble, int seq_words,
                                    int descramble_len, float* __restrict__ llr, int llr_stride) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= len * K) return;
    const int k = idx % K;
    const int i = i0 + idx / K;
    const float2* wk = w + ((size_t)i * K + k) * M;
    float2 x = make_float2(0.0f, 0.0f);
    for (int m = 0; m < M; ++m) x = cadd(x, cmul(wk[m], y[(size_t)m * D + i]));
    const float inv = 1.0f / fmaxf(noise[0] * noise_gain[(size_t)i * K + k], 1e-12f);
    const int qm = 2 * qa, nlev = 1 << qa;
    float* out = llr + (size_t)k * llr_stride;
    const unsigned* seq = scramble + (size_t)k * seq_words;
    for (int axis = 0; axis < 2; ++axis) {
        const float v = axis == 0 ? x.x : x.y;
        float best0[4], best1[4];
        for (int b = 0; b < 4; ++b) { best0[b] = RH_INF; best1[b] = RH_INF; }
        for (int label = 0; label < nlev; ++label) {
            const float e = v - levels[label];
            const float d = e * e;
            for (int b = 0; b < qa; ++b) {
                if ((label >> (qa - 1 - b)) & 1) best1[b] = fminf(best1[b], d);
                else best0[b] = fminf(best0[b], d);
            }
        }
        for (int b = 0; b < qa; ++b) {
            const int p = i * qm + 2 * b + axis;
            float l = (best1[b] - best0[b]) * inv;
            if (p < descramble_len && ((seq[p >> 5] >> (p & 31)) & 1u)) l = -l;
            out[p] = l;
        }
    }
}

// Map one user's coded bits (bits[k * bits_stride + i*qm ..], 0/1 bytes) to QAM symbols
// out[k * D + i] with the PAM level table (phy::qam::Modulator). One thread per (i, k).
extern "C" __global__ void modulate(const unsigned char* __restrict__ bits, int bits_stride, int K, int D,
                                    const float* __restrict__ levels, int qa, float2* __restrict__ out) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= K * D) return;
    const int k = idx / D, i = idx % D;
    const unsigned char* b = bits + (size_t)k * bits_stride + (size_t)i * 2 * qa;
    int il = 0, ql = 0;
    for (int p = 0; p < qa; ++p) {
        il = (il << 1) | (b[2 * p] & 1);
        ql = (ql << 1) | (b[2 * p + 1] & 1);
    }
    out[(size_t)k * D + i] = make_float2(levels[il], levels[ql]);
}

// Precode subcarriers [i0, i0 + len): out[m][i] = gain * sum_k W[k][m] s[k][i]
// (phy::zf::precode). One thread per (i, m).
extern "C" __global__ void precode(const float2* __restrict__ s, const float2* __restrict__ w, int M, int K,
                                   int D, int i0, int len, float gain, float2* __restrict__ out) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= len * M) return;
    const int m = idx % M;
    const int i = i0 + idx / M;
    float2 acc = make_float2(0.0f, 0.0f);
    for (int k = 0; k < K; ++k)
        acc = cadd(acc, cmul(w[((size_t)i * K + k) * M + m], cscale(s[(size_t)k * D + i], gain)));
    out[(size_t)m * D + i] = acc;
}
