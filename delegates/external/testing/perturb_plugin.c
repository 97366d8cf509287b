/* libdfarm_perturb_plugin.so (tests only): an external delegate that runs one
 * float32 elementwise op type correctly and then adds a fixed perturbation to
 * every element of its output, so that everything downstream drifts from the
 * CPU reference by a known amount. The release-gate end-to-end test
 * (tests/e2e/gate_e2e_test.cc) uses it to check that an accuracy regression
 * fails the gate and names the output.
 *
 * libdfarm_perturb_delegate.so (built from this file with
 * DFARM_PERTURB_DELEGATE): claims what the example plugin claims (float32 ADD
 * and SUB) and computes it correctly, except the one node named by
 * perturb_node:N, whose output gets the perturbation; the culprit finder's
 * test plants its bad node with it (docs/CONTRACTS.md).
 *
 * Options (besides the runtime's):
 *   op:ADD|SUB|MUL  the op type to claim (default ADD; the delegate build:
 *                   ADD and SUB unless given)
 *   delta:X         added to every output element perturbed (default 0.05;
 *                   0 makes a correct delegate)
 *   perturb_node:N  perturb node N's output only (default: every node the
 *                   plugin runs; the delegate build: none)
 * Shapes as the example plugin: both inputs the output's shape, or one of
 * them a single element; fused activations NONE, RELU, RELU_N1_TO_1, RELU6
 * (applied before the perturbation). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delegates/external/dfarm_delegate_plugin.h"

enum { kAdd = 0, kMul = 18, kSub = 41, kAddOrSub = -1 };
enum { kEveryNode = -1, kNoNode = -2 };

#ifdef DFARM_PERTURB_DELEGATE
#define DFARM_PERTURB_NAME "perturb_delegate"
#define DFARM_PERTURB_DEFAULT_OP kAddOrSub
#define DFARM_PERTURB_DEFAULT_NODE kNoNode
#else
#define DFARM_PERTURB_NAME "perturb"
#define DFARM_PERTURB_DEFAULT_OP kAdd
#define DFARM_PERTURB_DEFAULT_NODE kEveryNode
#endif
enum { kActNone = 0, kActRelu = 1, kActReluN1To1 = 2, kActRelu6 = 3 };

struct DfarmPluginDelegate {
  DfarmPluginReportFn report;
  void* report_data;
  int32_t op; /* a builtin code, or kAddOrSub */
  float delta;
  int32_t perturb_node; /* a node index, kEveryNode or kNoNode */
};

struct DfarmPluginKernel {
  DfarmPluginDelegate* delegate;
};

static DfarmPluginStatus Say(DfarmPluginReportFn report, void* data, DfarmPluginStatus status,
                             const char* text) {
  report(data, text);
  return status;
}

static int64_t NumElements(const DfarmPluginTensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; ++i) n *= t->dims[i];
  return n;
}

/* Sets *op from an op name; 0 when the name is not one the plugin offers. */
static int ParseOp(const char* name, int32_t* op) {
  if (strcmp(name, "ADD") == 0)
    *op = kAdd;
  else if (strcmp(name, "SUB") == 0)
    *op = kSub;
  else if (strcmp(name, "MUL") == 0)
    *op = kMul;
  else
    return 0;
  return 1;
}

static DfarmPluginStatus Create(const char* const* keys, const char* const* values,
                                int32_t num_options, DfarmPluginReportFn report, void* report_data,
                                DfarmPluginDelegate** delegate_out) {
  char text[256];
  int32_t op = DFARM_PERTURB_DEFAULT_OP;
  float delta = 0.05f;
  int32_t perturb_node = DFARM_PERTURB_DEFAULT_NODE;
  for (int32_t i = 0; i < num_options; ++i) {
    if (strcmp(keys[i], "op") == 0) {
      if (!ParseOp(values[i], &op)) {
        snprintf(text, sizeof(text), "perturb: op '%s' is not one of ADD, SUB, MUL", values[i]);
        return Say(report, report_data, DFARM_PLUGIN_ERROR, text);
      }
    } else if (strcmp(keys[i], "delta") == 0) {
      char* end = NULL;
      delta = strtof(values[i], &end);
      if (end == values[i] || *end != '\0') {
        snprintf(text, sizeof(text), "perturb: delta '%s' is not a number", values[i]);
        return Say(report, report_data, DFARM_PLUGIN_ERROR, text);
      }
    } else if (strcmp(keys[i], "perturb_node") == 0) {
      char* end = NULL;
      const long n = strtol(values[i], &end, 10);
      if (end == values[i] || *end != '\0' || n < 0 || n > 100000000) {
        snprintf(text, sizeof(text), "perturb: perturb_node '%s' is not a node index", values[i]);
        return Say(report, report_data, DFARM_PLUGIN_ERROR, text);
      }
      perturb_node = (int32_t)n;
    } else {
      snprintf(text, sizeof(text), "perturb: no option '%s' (options: op, delta, perturb_node)",
               keys[i]);
      return Say(report, report_data, DFARM_PLUGIN_ERROR, text);
    }
  }
  DfarmPluginDelegate* d = (DfarmPluginDelegate*)calloc(1, sizeof(DfarmPluginDelegate));
  if (d == NULL) return Say(report, report_data, DFARM_PLUGIN_ERROR, "out of memory");
  d->report = report;
  d->report_data = report_data;
  d->op = op;
  d->delta = delta;
  d->perturb_node = perturb_node;
  *delegate_out = d;
  return DFARM_PLUGIN_OK;
}

static void Destroy(DfarmPluginDelegate* d) { free(d); }

static DfarmPluginStatus SupportsNode(DfarmPluginDelegate* d, const DfarmPluginNode* node) {
  char text[256];
  const int claimed = d->op == kAddOrSub ? node->builtin_code == kAdd || node->builtin_code == kSub
                                         : node->builtin_code == d->op;
  if (!claimed) {
    snprintf(text, sizeof(text), "%s is not the op this plugin perturbs", node->op_name);
    return Say(d->report, d->report_data, DFARM_PLUGIN_UNSUPPORTED, text);
  }
  if (node->num_inputs != 2 || node->num_outputs != 1 || node->inputs[0] == NULL ||
      node->inputs[1] == NULL) {
    return Say(d->report, d->report_data, DFARM_PLUGIN_UNSUPPORTED,
               "expects two inputs and one output");
  }
  const DfarmPluginTensor* out = node->outputs[0];
  for (int i = 0; i < 2; ++i) {
    const DfarmPluginTensor* in = node->inputs[i];
    if (in->dtype != DFARM_PLUGIN_FLOAT32 || out->dtype != DFARM_PLUGIN_FLOAT32) {
      return Say(d->report, d->report_data, DFARM_PLUGIN_UNSUPPORTED, "float32 only");
    }
    if (NumElements(in) != 1 && NumElements(in) != NumElements(out)) {
      return Say(d->report, d->report_data, DFARM_PLUGIN_UNSUPPORTED,
                 "broadcasting is not supported");
    }
  }
  if (node->fused_activation > kActRelu6) {
    return Say(d->report, d->report_data, DFARM_PLUGIN_UNSUPPORTED,
               "fused activation is not supported");
  }
  return DFARM_PLUGIN_OK;
}

static DfarmPluginStatus KernelInit(DfarmPluginDelegate* d, const DfarmPluginPartition* partition,
                                    DfarmPluginKernel** kernel_out) {
  (void)partition;
  DfarmPluginKernel* k = (DfarmPluginKernel*)calloc(1, sizeof(DfarmPluginKernel));
  if (k == NULL) return Say(d->report, d->report_data, DFARM_PLUGIN_ERROR, "out of memory");
  k->delegate = d;
  *kernel_out = k;
  return DFARM_PLUGIN_OK;
}

static float Apply(int32_t op, float x, float y) {
  if (op == kSub) return x - y;
  if (op == kMul) return x * y;
  return x + y;
}

static DfarmPluginStatus KernelInvoke(DfarmPluginKernel* k, const DfarmPluginPartition* p) {
  const DfarmPluginDelegate* d = k->delegate;
  for (int32_t n = 0; n < p->num_nodes; ++n) {
    const DfarmPluginNode* node = p->nodes[n];
    const DfarmPluginTensor* a = node->inputs[0];
    const DfarmPluginTensor* b = node->inputs[1];
    const DfarmPluginTensor* o = node->outputs[0];
    if (a->data == NULL || b->data == NULL || o->data == NULL) {
      return Say(d->report, d->report_data, DFARM_PLUGIN_ERROR, "a tensor has no storage");
    }
    const float* x = (const float*)a->data;
    const float* y = (const float*)b->data;
    float* z = (float*)o->data;
    const int64_t count = NumElements(o);
    const int64_t xs = NumElements(a) == 1 ? 0 : 1, ys = NumElements(b) == 1 ? 0 : 1;
    const int perturbed = d->perturb_node == kEveryNode || d->perturb_node == node->index;
    const float delta = perturbed ? d->delta : 0.0f;
    float lo = -3.4e38f, hi = 3.4e38f;
    if (node->fused_activation == kActRelu) lo = 0.0f;
    if (node->fused_activation == kActReluN1To1) lo = -1.0f, hi = 1.0f;
    if (node->fused_activation == kActRelu6) lo = 0.0f, hi = 6.0f;
    for (int64_t i = 0; i < count; ++i) {
      float v = Apply(node->builtin_code, x[i * xs], y[i * ys]);
      z[i] = (v < lo ? lo : (v > hi ? hi : v)) + delta;
    }
  }
  return DFARM_PLUGIN_OK;
}

static void KernelFree(DfarmPluginKernel* k) { free(k); }

static const DfarmDelegatePluginApi kApi = {
    DFARM_DELEGATE_PLUGIN_API_VERSION,
    DFARM_PERTURB_NAME,
    Create,
    Destroy,
    SupportsNode,
    KernelInit,
    NULL, /* kernel_prepare (optional) */
    KernelInvoke,
    KernelFree,
};

DFARM_PLUGIN_EXPORT const DfarmDelegatePluginApi* dfarm_delegate_plugin_get_api(void) {
  return &kApi;
}
