#include "delegates/gpu/gpu_kernels.h"

namespace dfarm::delegates::gpu {

// Every kernel has the one signature
//   (a, b, c: inputs; out; P: the int parameters of all launches; off: this one's)
// and one work-item per output element (softmax: per row), NHWC, index i <
// p[0] (the global size is rounded up to the work-group size). Floats travel
// in P as their bits (as_float). Storage is float, or half with DFARM_FP16
// (vload_half / vstore_half: core OpenCL, no cl_khr_fp16 needed); DFARM_HALF_MATH
// (cl_khr_fp16 devices with precision_loss_allowed) accumulates in half.
const char* const kGpuKernelSource = R"CLC(
#ifdef DFARM_HALF_MATH
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half acc_t;
#else
typedef float acc_t;
#endif
#ifdef DFARM_HALF_MATH
typedef half4 acc4_t;
#define ACC4(v) convert_half4(v)
#else
typedef float4 acc4_t;
#define ACC4(v) (v)
#endif
#ifdef DFARM_FP16
#define LD4(p, i) vload_half4(0, (p) + (i))
#define ST4(p, i, v) vstore_half4(convert_float4(v), 0, (p) + (i))
#else
#define LD4(p, i) vload4(0, (p) + (i))
#define ST4(p, i, v) vstore4(convert_float4(v), 0, (p) + (i))
#endif
#ifdef DFARM_FP16
typedef half store_t;
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half((float)(v), (i), (p))
#else
typedef float store_t;
#define LD(p, i) ((p)[i])
#define ST(p, i, v) ((p)[i] = (float)(v))
#endif
#define ARGS __global const store_t* a, __global const store_t* b, \
             __global const store_t* c, __global store_t* out, \
             __global const int* P, int off
#define HEAD const __global int* p = P + off; const int i = get_global_id(0); \
             if (i >= p[0]) return;
#define PF(k) as_float(p[k])

float act(float v, __global const int* p, int k) { return clamp(v, PF(k), PF(k + 1)); }

// binary's and binary_flat's op p[1]: ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM,
// SQUARED_DIFFERENCE, PRELU (y the slope).
float binop(int op, float x, float y) {
  switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    case 3: return x / y;
    case 4: return fmax(x, y);
    case 5: return fmin(x, y);
    case 6: return (x - y) * (x - y);
    default: return x >= 0.0f ? x : x * y;  // PRELU
  }
}

// p: n, op, lo, hi, out dims[4] (4..), a strides[4] (8..), b strides[4] (12..)
__kernel void binary(ARGS) {
  HEAD
  int r = i, ia = 0, ib = 0;
  for (int d = 3; d >= 0; --d) {
    const int dim = p[4 + d], x = r % dim;
    r /= dim;
    ia += x * p[8 + d];
    ib += x * p[12 + d];
  }
  const float x = LD(a, ia), y = LD(b, ib);
  ST(out, i, act(binop(p[1], x, y), p, 2));
}

// binary where a, b and out have the same shape (no broadcast). Parameters as binary's.
__kernel void binary_flat(ARGS) {
  HEAD
  const float x = LD(a, i), y = LD(b, i);
  ST(out, i, act(binop(p[1], x, y), p, 2));
}


// p: n, op, lo, hi, alpha
__kernel void unary(ARGS) {
  HEAD
  const float x = LD(a, i);
  float v;
  switch (p[1]) {
    case 0: v = x; break;
    case 1: v = fmax(x, 0.0f); break;
    case 2: v = clamp(x, 0.0f, 6.0f); break;
    case 3: v = clamp(x, -1.0f, 1.0f); break;
    case 4: v = 1.0f / (1.0f + exp(-x)); break;
    case 5: v = tanh(x); break;
    case 6: v = x * clamp(x + 3.0f, 0.0f, 6.0f) / 6.0f; break;
    case 7: v = x >= 0.0f ? x : x * PF(4); break;
    case 8: v = fabs(x); break;
    case 9: v = -x; break;
    default: v = sqrt(x); break;
  }
  ST(out, i, act(v, p, 2));
}

// CONV_2D (grouped, dilated) and DEPTHWISE_CONV_2D (depthwise: p[19] > 0 is
// the depth multiplier). a input, b filter [OC,KH,KW,IC/groups] or
// [1,KH,KW,OC], c bias. p: n, lo, hi, H, W, C, OH, OW, OC, KH, KW, SH, SW,
// DH, DW, PT, PL, groups, has_bias, multiplier
__kernel void conv(ARGS) {
  HEAD
  const int H = p[3], W = p[4], C = p[5], OH = p[6], OW = p[7], OC = p[8];
  const int KH = p[9], KW = p[10], mult = p[19];
  const int oc = i % OC, ox = (i / OC) % OW, oy = (i / (OC * OW)) % OH, n = i / (OC * OW * OH);
  acc_t sum = p[18] ? (acc_t)LD(c, oc) : (acc_t)0;
  const int gc = mult > 0 ? 1 : C / p[17];
  const int c0 = mult > 0 ? oc / mult : (oc / (OC / p[17])) * gc;
  for (int ky = 0; ky < KH; ++ky) {
    const int iy = oy * p[11] - p[15] + ky * p[13];
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int ix = ox * p[12] - p[16] + kx * p[14];
      if (ix < 0 || ix >= W) continue;
      const int in_at = ((n * H + iy) * W + ix) * C + c0;
      if (mult > 0) {
        sum += (acc_t)LD(a, in_at) * (acc_t)LD(b, (ky * KW + kx) * OC + oc);
      } else {
        const int w_at = ((oc * KH + ky) * KW + kx) * gc;
        for (int k = 0; k < gc; ++k) sum += (acc_t)LD(a, in_at + k) * (acc_t)LD(b, w_at + k);
      }
    }
  }
  ST(out, i, act((float)sum, p, 1));
}

// CONV_2D without groups, its filter stored [KH,KW,C,OC] (Launch::b_layout):
// neighbouring work-items (output channels) read neighbouring weights.
// Parameters as conv's.
__kernel void conv_hwio(ARGS) {
  HEAD
  const int H = p[3], W = p[4], C = p[5], OH = p[6], OW = p[7], OC = p[8];
  const int KH = p[9], KW = p[10];
  const int oc = i % OC, ox = (i / OC) % OW, oy = (i / (OC * OW)) % OH, n = i / (OC * OW * OH);
  acc_t sum = p[18] ? (acc_t)LD(c, oc) : (acc_t)0;
  for (int ky = 0; ky < KH; ++ky) {
    const int iy = oy * p[11] - p[15] + ky * p[13];
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int ix = ox * p[12] - p[16] + kx * p[14];
      if (ix < 0 || ix >= W) continue;
      const int in_at = ((n * H + iy) * W + ix) * C, w_at = (ky * KW + kx) * C * OC + oc;
      for (int k = 0; k < C; ++k) sum += (acc_t)LD(a, in_at + k) * (acc_t)LD(b, w_at + k * OC);
    }
  }
  ST(out, i, act((float)sum, p, 1));
}

// conv_hwio for 4 output channels per work-item (OC % 4 == 0): independent
// accumulators and vector loads of the weights. p[0]: outputs / 4.
__kernel void conv_hwio4(ARGS) {
  HEAD
  const int H = p[3], W = p[4], C = p[5], OH = p[6], OW = p[7], OC = p[8];
  const int KH = p[9], KW = p[10], OC4 = OC / 4;
  const int oc = (i % OC4) * 4, ox = (i / OC4) % OW, oy = (i / (OC4 * OW)) % OH;
  const int n = i / (OC4 * OW * OH);
  acc4_t sum = p[18] ? ACC4(LD4(c, oc)) : (acc4_t)0;
  for (int ky = 0; ky < KH; ++ky) {
    const int iy = oy * p[11] - p[15] + ky * p[13];
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int ix = ox * p[12] - p[16] + kx * p[14];
      if (ix < 0 || ix >= W) continue;
      const int in_at = ((n * H + iy) * W + ix) * C, w_at = (ky * KW + kx) * C * OC + oc;
      for (int k = 0; k < C; ++k) {
        sum += (acc4_t)((acc_t)LD(a, in_at + k)) * ACC4(LD4(b, w_at + k * OC));
      }
    }
  }
  const float4 v = clamp(convert_float4(sum), PF(1), PF(2));
  ST4(out, ((n * OH + oy) * OW + ox) * OC + oc, v);
}

// DEPTHWISE_CONV_2D with multiplier 1 for 4 channels per work-item (C % 4
// == 0). Parameters as conv's; p[0]: outputs / 4.
__kernel void depthwise4(ARGS) {
  HEAD
  const int H = p[3], W = p[4], C = p[5], OH = p[6], OW = p[7];
  const int KH = p[9], KW = p[10], C4 = C / 4;
  const int ch = (i % C4) * 4, ox = (i / C4) % OW, oy = (i / (C4 * OW)) % OH;
  const int n = i / (C4 * OW * OH);
  acc4_t sum = p[18] ? ACC4(LD4(c, ch)) : (acc4_t)0;
  for (int ky = 0; ky < KH; ++ky) {
    const int iy = oy * p[11] - p[15] + ky * p[13];
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int ix = ox * p[12] - p[16] + kx * p[14];
      if (ix < 0 || ix >= W) continue;
      sum += ACC4(LD4(a, ((n * H + iy) * W + ix) * C + ch)) * ACC4(LD4(b, (ky * KW + kx) * C + ch));
    }
  }
  const float4 v = clamp(convert_float4(sum), PF(1), PF(2));
  ST4(out, ((n * OH + oy) * OW + ox) * C + ch, v);
}

// TRANSPOSE_CONV and Convolution2DTransposeBias, gathered per output.
// b filter [OC,KH,KW,C]. p: n, lo, hi, H, W, C, OH, OW, OC, KH, KW, SH, SW,
// PT, PL, has_bias
__kernel void transpose_conv(ARGS) {
  HEAD
  const int H = p[3], W = p[4], C = p[5], OH = p[6], OW = p[7], OC = p[8];
  const int KH = p[9], KW = p[10], SH = p[11], SW = p[12];
  const int oc = i % OC, ox = (i / OC) % OW, oy = (i / (OC * OW)) % OH, n = i / (OC * OW * OH);
  acc_t sum = p[15] ? (acc_t)LD(c, oc) : (acc_t)0;
  for (int ky = 0; ky < KH; ++ky) {
    const int ty = oy + p[13] - ky;
    if (ty < 0 || ty % SH != 0 || ty / SH >= H) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int tx = ox + p[14] - kx;
      if (tx < 0 || tx % SW != 0 || tx / SW >= W) continue;
      const int in_at = ((n * H + ty / SH) * W + tx / SW) * C;
      const int w_at = ((oc * KH + ky) * KW + kx) * C;
      for (int k = 0; k < C; ++k) sum += (acc_t)LD(a, in_at + k) * (acc_t)LD(b, w_at + k);
    }
  }
  ST(out, i, act((float)sum, p, 1));
}

// TRANSPOSE_CONV with its filter stored [KH,KW,C,OC] (Launch::b_layout).
__kernel void transpose_conv_hwio(ARGS) {
  HEAD
  const int H = p[3], W = p[4], C = p[5], OH = p[6], OW = p[7], OC = p[8];
  const int KH = p[9], KW = p[10], SH = p[11], SW = p[12];
  const int oc = i % OC, ox = (i / OC) % OW, oy = (i / (OC * OW)) % OH, n = i / (OC * OW * OH);
  acc_t sum = p[15] ? (acc_t)LD(c, oc) : (acc_t)0;
  for (int ky = 0; ky < KH; ++ky) {
    const int ty = oy + p[13] - ky;
    if (ty < 0 || ty % SH != 0 || ty / SH >= H) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int tx = ox + p[14] - kx;
      if (tx < 0 || tx % SW != 0 || tx / SW >= W) continue;
      const int in_at = ((n * H + ty / SH) * W + tx / SW) * C;
      const int w_at = (ky * KW + kx) * C * OC + oc;
      for (int k = 0; k < C; ++k) sum += (acc_t)LD(a, in_at + k) * (acc_t)LD(b, w_at + k * OC);
    }
  }
  ST(out, i, act((float)sum, p, 1));
}

// b weights: unit u's k-th at u * p[6] + k * p[7] ([units, depth]: depth, 1;
// moved to [depth, units] (Launch::b_layout): 1, units).
// p: n, lo, hi, units, depth, has_bias, unit stride, depth stride
__kernel void fully_connected(ARGS) {
  HEAD
  const int units = p[3], depth = p[4], u = i % units, row = i / units;
  acc_t sum = p[5] ? (acc_t)LD(c, u) : (acc_t)0;
  for (int k = 0; k < depth; ++k) {
    sum += (acc_t)LD(a, row * depth + k) * (acc_t)LD(b, u * p[6] + k * p[7]);
  }
  ST(out, i, act((float)sum, p, 1));
}

// p: n, lo, hi, H, W, C, OH, OW, FH, FW, SH, SW, PT, PL, average
__kernel void pool(ARGS) {
  HEAD
  const int H = p[3], W = p[4], C = p[5], OH = p[6], OW = p[7];
  const int ch = i % C, ox = (i / C) % OW, oy = (i / (C * OW)) % OH, n = i / (C * OW * OH);
  float best = -INFINITY, sum = 0.0f;
  int count = 0;
  for (int ky = 0; ky < p[8]; ++ky) {
    const int iy = oy * p[10] - p[12] + ky;
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < p[9]; ++kx) {
      const int ix = ox * p[11] - p[13] + kx;
      if (ix < 0 || ix >= W) continue;
      const float v = LD(a, ((n * H + iy) * W + ix) * C + ch);
      best = fmax(best, v);
      sum += v;
      ++count;
    }
  }
  ST(out, i, act(p[14] ? (count > 0 ? sum / count : 0.0f) : best, p, 1));
}

// MEAN over the dimensions flagged. p: n, in dims[4] (1..), reduce[4] (5..)
__kernel void mean(ARGS) {
  HEAD
  int r = i, base[4], len[4];
  for (int d = 3; d >= 0; --d) {
    const int od = p[5 + d] ? 1 : p[1 + d];
    base[d] = r % od;
    r /= od;
    len[d] = p[5 + d] ? p[1 + d] : 1;
  }
  float sum = 0.0f;
  for (int x0 = 0; x0 < len[0]; ++x0)
    for (int x1 = 0; x1 < len[1]; ++x1)
      for (int x2 = 0; x2 < len[2]; ++x2)
        for (int x3 = 0; x3 < len[3]; ++x3) {
          const int at = (((base[0] + x0) * p[2] + base[1] + x1) * p[3] + base[2] + x2) * p[4] +
                         base[3] + x3;
          sum += LD(a, at);
        }
  ST(out, i, sum / (float)(len[0] * len[1] * len[2] * len[3]));
}

// p: n, value, out dims[4] (2..), in dims[4] (6..), before[4] (10..)
__kernel void pad(ARGS) {
  HEAD
  int r = i, at = 0, stride = 1;
  bool inside = true;
  for (int d = 3; d >= 0; --d) {
    const int x = r % p[2 + d] - p[10 + d];
    r /= p[2 + d];
    inside = inside && x >= 0 && x < p[6 + d];
    at += x * stride;
    stride *= p[6 + d];
  }
  ST(out, i, inside ? LD(a, at) : PF(1));
}

// p: n, H, W, C, OH, OW, half_pixel, scale_y, scale_x
__kernel void resize_bilinear(ARGS) {
  HEAD
  const int H = p[1], W = p[2], C = p[3], OH = p[4], OW = p[5];
  const int ch = i % C, ox = (i / C) % OW, oy = (i / (C * OW)) % OH, n = i / (C * OW * OH);
  const float y = p[6] ? ((float)oy + 0.5f) * PF(7) - 0.5f : (float)oy * PF(7);
  const float x = p[6] ? ((float)ox + 0.5f) * PF(8) - 0.5f : (float)ox * PF(8);
  const int y0 = max((int)floor(y), 0), y1 = min((int)ceil(y), H - 1);
  const int x0 = max((int)floor(x), 0), x1 = min((int)ceil(x), W - 1);
  const float dy = y - (float)y0, dx = x - (float)x0;
  const int row0 = (n * H + y0) * W, row1 = (n * H + y1) * W;
  const float v = LD(a, (row0 + x0) * C + ch) * (1.0f - dy) * (1.0f - dx) +
                  LD(a, (row1 + x0) * C + ch) * dy * (1.0f - dx) +
                  LD(a, (row0 + x1) * C + ch) * (1.0f - dy) * dx +
                  LD(a, (row1 + x1) * C + ch) * dy * dx;
  ST(out, i, v);
}

// One CONCATENATION input into its block of the output.
// p: n, lo, hi, in_block (axis_in * inner), out_block (axis_out * inner), offset
__kernel void concat_slice(ARGS) {
  HEAD
  ST(out, (i / p[3]) * p[4] + p[5] + i % p[3], act(LD(a, i), p, 1));
}

// One work-item per row. p: rows, depth, beta
__kernel void softmax(ARGS) {
  HEAD
  const int depth = p[1], at = i * depth;
  float top = -INFINITY, sum = 0.0f;
  for (int k = 0; k < depth; ++k) top = fmax(top, LD(a, at + k));
  for (int k = 0; k < depth; ++k) sum += exp((LD(a, at + k) - top) * PF(2));
  for (int k = 0; k < depth; ++k) ST(out, at + k, exp((LD(a, at + k) - top) * PF(2)) / sum);
}

// A quantized tensor's values rounded to its grid, in place (a == out): the
// real value of the code round(x / scale) + zero_point, saturated to [qmin, qmax].
// p: n, scale, zero_point, qmin, qmax
__kernel void fake_quant(ARGS) {
  HEAD
  const float zp = (float)p[2];
  const float q = clamp(round(LD(a, i) / PF(1)) + zp, (float)p[3], (float)p[4]);
  ST(out, i, (q - zp) * PF(1));
}

// p: n, H, W, C (input), block, OC
__kernel void depth_to_space(ARGS) {
  HEAD
  const int W = p[2], C = p[3], bs = p[4], OC = p[5], OW = W * bs, OH = p[1] * bs;
  const int oc = i % OC, ox = (i / OC) % OW, oy = (i / (OC * OW)) % OH, n = i / (OC * OW * OH);
  const int ic = ((oy % bs) * bs + ox % bs) * OC + oc;
  ST(out, i, LD(a, ((n * p[1] + oy / bs) * W + ox / bs) * C + ic));
}
)CLC";

}  // namespace dfarm::delegates::gpu
