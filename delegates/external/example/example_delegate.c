/* libdfarm_example_delegate.so: an external delegate plugin that runs
 * float32 ADD and SUB only (like TensorFlow Lite's MyDelegate example), so a
 * model with other ops shows partial delegation. Built against
 * dfarm_delegate_plugin.h alone.
 *
 * Shapes: both inputs the output's shape, or one of them a single element.
 * Fused activations NONE, RELU, RELU_N1_TO_1 and RELU6.
 * Options: none besides the runtime's; an unknown key is an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delegates/external/dfarm_delegate_plugin.h"

enum { kAdd = 0, kSub = 41 };
enum { kActNone = 0, kActRelu = 1, kActReluN1To1 = 2, kActRelu6 = 3 };

struct DfarmPluginDelegate {
  DfarmPluginReportFn report;
  void* report_data;
};

struct DfarmPluginKernel {
  DfarmPluginDelegate* delegate;
};

static DfarmPluginStatus Say(DfarmPluginDelegate* d, DfarmPluginStatus status, const char* text) {
  d->report(d->report_data, text);
  return status;
}

static int64_t NumElements(const DfarmPluginTensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; ++i) n *= t->dims[i];
  return n;
}

static DfarmPluginStatus Create(const char* const* keys, const char* const* values,
                                int32_t num_options, DfarmPluginReportFn report, void* report_data,
                                DfarmPluginDelegate** delegate_out) {
  (void)values;
  if (num_options > 0) {
    char text[256];
    snprintf(text, sizeof(text), "the example delegate has no option '%s'", keys[0]);
    report(report_data, text);
    return DFARM_PLUGIN_ERROR;
  }
  DfarmPluginDelegate* d = (DfarmPluginDelegate*)calloc(1, sizeof(DfarmPluginDelegate));
  if (d == NULL) {
    report(report_data, "out of memory");
    return DFARM_PLUGIN_ERROR;
  }
  d->report = report;
  d->report_data = report_data;
  *delegate_out = d;
  return DFARM_PLUGIN_OK;
}

static void Destroy(DfarmPluginDelegate* d) { free(d); }

static DfarmPluginStatus SupportsNode(DfarmPluginDelegate* d, const DfarmPluginNode* node) {
  char text[256];
  if (node->builtin_code != kAdd && node->builtin_code != kSub) {
    snprintf(text, sizeof(text), "%s is not supported (only ADD and SUB)", node->op_name);
    return Say(d, DFARM_PLUGIN_UNSUPPORTED, text);
  }
  if (node->num_inputs != 2 || node->num_outputs != 1 || node->inputs[0] == NULL ||
      node->inputs[1] == NULL) {
    return Say(d, DFARM_PLUGIN_UNSUPPORTED, "expects two inputs and one output");
  }
  const DfarmPluginTensor* out = node->outputs[0];
  for (int i = 0; i < 2; ++i) {
    const DfarmPluginTensor* in = node->inputs[i];
    if (in->dtype != DFARM_PLUGIN_FLOAT32 || out->dtype != DFARM_PLUGIN_FLOAT32) {
      snprintf(text, sizeof(text), "%s is supported for float32 only", node->op_name);
      return Say(d, DFARM_PLUGIN_UNSUPPORTED, text);
    }
    if (NumElements(in) != 1 && NumElements(in) != NumElements(out)) {
      snprintf(text, sizeof(text), "%s with broadcasting is not supported", node->op_name);
      return Say(d, DFARM_PLUGIN_UNSUPPORTED, text);
    }
  }
  if (node->fused_activation > kActRelu6) {
    return Say(d, DFARM_PLUGIN_UNSUPPORTED, "fused activation is not supported");
  }
  return DFARM_PLUGIN_OK;
}

static DfarmPluginStatus KernelInit(DfarmPluginDelegate* d, const DfarmPluginPartition* partition,
                                    DfarmPluginKernel** kernel_out) {
  (void)partition;
  DfarmPluginKernel* k = (DfarmPluginKernel*)calloc(1, sizeof(DfarmPluginKernel));
  if (k == NULL) return Say(d, DFARM_PLUGIN_ERROR, "out of memory");
  k->delegate = d;
  *kernel_out = k;
  return DFARM_PLUGIN_OK;
}

static DfarmPluginStatus KernelInvoke(DfarmPluginKernel* k, const DfarmPluginPartition* p) {
  for (int32_t n = 0; n < p->num_nodes; ++n) {
    const DfarmPluginNode* node = p->nodes[n];
    const DfarmPluginTensor* a = node->inputs[0];
    const DfarmPluginTensor* b = node->inputs[1];
    const DfarmPluginTensor* o = node->outputs[0];
    if (a->data == NULL || b->data == NULL || o->data == NULL) {
      return Say(k->delegate, DFARM_PLUGIN_ERROR, "a tensor has no storage");
    }
    const float* x = (const float*)a->data;
    const float* y = (const float*)b->data;
    float* z = (float*)o->data;
    const int64_t count = NumElements(o);
    const int64_t xs = NumElements(a) == 1 ? 0 : 1, ys = NumElements(b) == 1 ? 0 : 1;
    const float sign = node->builtin_code == kSub ? -1.0f : 1.0f;
    float lo = -3.4e38f, hi = 3.4e38f;
    if (node->fused_activation == kActRelu) lo = 0.0f;
    if (node->fused_activation == kActReluN1To1) lo = -1.0f, hi = 1.0f;
    if (node->fused_activation == kActRelu6) lo = 0.0f, hi = 6.0f;
    for (int64_t i = 0; i < count; ++i) {
      float v = x[i * xs] + sign * y[i * ys];
      z[i] = v < lo ? lo : (v > hi ? hi : v);
    }
  }
  return DFARM_PLUGIN_OK;
}

static void KernelFree(DfarmPluginKernel* k) { free(k); }

static const DfarmDelegatePluginApi kApi = {
    DFARM_DELEGATE_PLUGIN_API_VERSION,
    "example",
    Create,
    Destroy,
    SupportsNode,
    KernelInit,
    NULL, /* kernel_prepare (optional): nothing to pack */
    KernelInvoke,
    KernelFree,
};

DFARM_PLUGIN_EXPORT const DfarmDelegatePluginApi* dfarm_delegate_plugin_get_api(void) {
  return &kApi;
}
