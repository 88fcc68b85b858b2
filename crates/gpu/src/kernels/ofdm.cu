// OFDM kernels: one CTA transforms one antenna's symbol in shared memory.
//
// Why not cuFFT: the receive side fuses the int16 load, cyclic-prefix removal, the FFT,
// the data-subcarrier gather and the null-bin noise measurement into one kernel (no
// intermediate buffer), and the executor description needs every kernel's registers
// and shared memory, which cuFFT's internal kernels do not expose.
//
// Transform: iterative radix-2 decimation in time, input loaded in bit-reversed order,
// unnormalised like rustfft (forward e^{-2 pi i kn/N}, inverse e^{+2 pi i kn/N}).

__device__ __forceinline__ unsigned bit_reverse(unsigned v, int bits) {
    return __brev(v) >> (32 - bits);
}

// In-place radix-2 FFT of n = 2^logn points in shared memory (input bit-reversed).
__device__ void fft_shared(float2* s, int n, float sign) {
    for (int half = 1; half < n; half <<= 1) {
        __syncthreads();
        for (int t = threadIdx.x; t < (n >> 1); t += blockDim.x) {
            const int j = t & (half - 1);
            const int i0 = ((t - j) << 1) + j;
            const int i1 = i0 + half;
            float sn, cs;
            // angle = sign * 2 pi j / (2 half)
            sincospif(sign * (float)j / (float)half, &sn, &cs);
            const float2 a = s[i0];
            const float2 b = s[i1];
            const float2 w = make_float2(b.x * cs - b.y * sn, b.x * sn + b.y * cs);
            s[i0] = cadd(a, w);
            s[i1] = csub(a, w);
        }
    }
    __syncthreads();
}

// rustfft bin of natural-order subcarrier `natural` (DC at n/2), as phy::ofdm::data_bin.
__device__ __forceinline__ int natural_to_bin(int natural, int n) { return (natural + (n >> 1)) & (n - 1); }

// Receive: grid.x = antennas. rx is the frame's samples, antenna-major (frame_len each);
// the symbol starts at symbol * sym_len. Writes data subcarriers to out[ant][data_num]
// and the null-bin energy to null_energy[ant]. Dynamic shared memory: n float2.
extern "C" __global__ void ofdm_rx(const short2* __restrict__ rx, int frame_len, int symbol, int sym_len,
                                   int cp, int n, int logn, int data_start, int data_num,
                                   float2* __restrict__ out, float* __restrict__ null_energy) {
    extern __shared__ float2 spectrum[];
    const int ant = blockIdx.x;
    const short2* src = rx + (size_t)ant * frame_len + (size_t)symbol * sym_len + cp;
    const float scale = 1.0f / 32767.0f;  // phy::ofdm::remove_cp_ci16
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const short2 v = src[t];
        spectrum[bit_reverse((unsigned)t, logn)] = make_float2((float)v.x * scale, (float)v.y * scale);
    }
    fft_shared(spectrum, n, -1.0f);
    float2* dst = out + (size_t)ant * data_num;
    for (int i = threadIdx.x; i < data_num; i += blockDim.x) dst[i] = spectrum[natural_to_bin(data_start + i, n)];
    float e = 0.0f;
    for (int nat = threadIdx.x; nat < n; nat += blockDim.x) {
        if (nat < data_start || nat >= data_start + data_num) {
            const float2 v = spectrum[natural_to_bin(nat, n)];
            e += v.x * v.x + v.y * v.y;
        }
    }
    e = block_sum(e);
    if (threadIdx.x == 0) null_energy[ant] = e;
}

// Transmit: grid.x = antennas. freq holds the antenna's data subcarriers
// (freq[ant][data_num]); the unnormalised inverse transform times `gain` (the caller
// folds 1/sqrt(n) in) is written with its cyclic prefix as int16 into
// tx[ant][symbol * sym_len ..], rounding like radiohost_iq::Ci16::from_cf32.
extern "C" __global__ void ofdm_tx(const float2* __restrict__ freq, int n, int logn, int data_start,
                                   int data_num, float gain, short2* __restrict__ tx, int frame_len,
                                   int symbol, int sym_len, int cp) {
    extern __shared__ float2 spectrum[];
    const int ant = blockIdx.x;
    for (int t = threadIdx.x; t < n; t += blockDim.x) spectrum[t] = make_float2(0.0f, 0.0f);
    __syncthreads();
    const float2* src = freq + (size_t)ant * data_num;
    for (int i = threadIdx.x; i < data_num; i += blockDim.x)
        spectrum[bit_reverse((unsigned)natural_to_bin(data_start + i, n), logn)] = src[i];
    fft_shared(spectrum, n, 1.0f);
    short2* dst = tx + (size_t)ant * frame_len + (size_t)symbol * sym_len;
    for (int t = threadIdx.x; t < n + cp; t += blockDim.x) {
        const float2 v = spectrum[t < cp ? n - cp + t : t - cp];
        float re = roundf(v.x * gain * 32767.0f), im = roundf(v.y * gain * 32767.0f);
        // Saturate like Rust's `as i16`; NaN becomes 0.
        re = isnan(re) ? 0.0f : fminf(fmaxf(re, -32768.0f), 32767.0f);
        im = isnan(im) ? 0.0f : fminf(fmaxf(im, -32768.0f), 32767.0f);
        dst[t] = make_short2((short)re, (short)im);
    }
}
