// QUANTIZE's tests live in quantized_ops_test.cc, with the other quantized kernels' tests.
