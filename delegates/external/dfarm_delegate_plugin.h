/* DelegateFarm external delegate plugin ABI.
 *
 * A plugin is a shared library built against this header alone (C99; no
 * other DelegateFarm source is needed). It exports one function,
 * dfarm_delegate_plugin_get_api(), returning a table of function pointers.
 * dfarm-runner loads it with
 *   --delegate external --delegate-options 'path:/abs/libmy_delegate.so;k1:v1;k2:v2'
 * and hands every option except `path` and the partition options
 * (max_delegated_partitions, min_nodes_per_partition, require_full_delegation)
 * to create().
 *
 * Versioning: api_version is the first field of the table and stays there in
 * every version. The loader refuses a plugin whose api_version differs from
 * the DFARM_DELEGATE_PLUGIN_API_VERSION it was built with; a change to any
 * struct or method below bumps the version.
 *
 * Lifetimes: the runtime calls create() once, then supports_node() per node,
 * then per partition kernel_init(), kernel_prepare(), kernel_invoke() (many
 * times), kernel_free(), and finally destroy(). All calls come from one
 * thread. Node, tensor and partition structs are owned by the runtime:
 * - a DfarmPluginNode passed to supports_node() is valid only during the call;
 * - a DfarmPluginPartition (with its nodes and tensors) passed to
 *   kernel_init() stays valid, at the same address, until kernel_free(); its
 *   tensors' `data` is set before kernel_prepare() and then never moves.
 *
 * Errors: a method returns DFARM_PLUGIN_OK, DFARM_PLUGIN_UNSUPPORTED (the
 * plugin cannot do this: a node it does not claim, an option value it does
 * not offer on this machine) or DFARM_PLUGIN_ERROR (it failed). Before
 * returning anything but OK it should call the `report` callback given to
 * create() once with one line saying why ("SUB with int8 inputs is not
 * supported"); the runtime copies the message.
 */
#ifndef DFARM_DELEGATE_PLUGIN_H_
#define DFARM_DELEGATE_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DFARM_DELEGATE_PLUGIN_API_VERSION 1u

/* The name of the one exported symbol. */
#define DFARM_DELEGATE_PLUGIN_ENTRY "dfarm_delegate_plugin_get_api"

#if defined(_WIN32)
#define DFARM_PLUGIN_EXPORT __declspec(dllexport)
#else
#define DFARM_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

typedef enum DfarmPluginStatus {
  DFARM_PLUGIN_OK = 0,
  DFARM_PLUGIN_UNSUPPORTED = 1,
  DFARM_PLUGIN_ERROR = 2,
} DfarmPluginStatus;

/* Element types: the values of TensorFlow Lite's TensorType (schema.fbs). */
typedef enum DfarmPluginDType {
  DFARM_PLUGIN_FLOAT32 = 0,
  DFARM_PLUGIN_FLOAT16 = 1,
  DFARM_PLUGIN_INT32 = 2,
  DFARM_PLUGIN_UINT8 = 3,
  DFARM_PLUGIN_INT64 = 4,
  DFARM_PLUGIN_BOOL = 6,
  DFARM_PLUGIN_INT16 = 7,
  DFARM_PLUGIN_INT8 = 9,
} DfarmPluginDType;

/* Opaque handles, defined by the plugin. */
typedef struct DfarmPluginDelegate DfarmPluginDelegate;
typedef struct DfarmPluginKernel DfarmPluginKernel;

typedef struct DfarmPluginTensor {
  int32_t index;    /* the tensor's index in the model's subgraph */
  const char* name; /* never null; may be "" */
  int32_t dtype;    /* DfarmPluginDType */
  int32_t rank;
  const int32_t* dims; /* rank entries, row-major (NHWC for images) */
  size_t bytes;
  /* Storage: row-major, little-endian. For constants set from the start;
   * for other tensors null until kernel_prepare(). */
  void* data;
  int32_t is_static; /* 1: data holds its values before invoke (constant or folded) */
  int32_t quantized; /* 1: per-tensor affine, real = scale * (q - zero_point) */
  float scale;
  int64_t zero_point;
} DfarmPluginTensor;

typedef struct DfarmPluginNode {
  int32_t index;            /* the node's index in the model's subgraph */
  int32_t builtin_code;     /* TensorFlow Lite BuiltinOperator (ADD = 0, SUB = 41, CUSTOM = 32) */
  const char* op_name;      /* "ADD", or a custom op's code */
  int32_t fused_activation; /* TFLite ActivationFunctionType: 0 NONE, 1 RELU, 2 RELU_N1_TO_1,
                               3 RELU6, 4 TANH, 5 SIGN_BIT; 0 for ops without one */
  int32_t num_inputs;
  const DfarmPluginTensor* const* inputs; /* an entry is null for an omitted optional input */
  int32_t num_outputs;
  const DfarmPluginTensor* const* outputs;
} DfarmPluginNode;

typedef struct DfarmPluginPartition {
  int32_t index; /* among the delegated partitions of the model */
  int32_t num_nodes;
  const DfarmPluginNode* const* nodes; /* in a valid execution order */
  int32_t num_inputs;                  /* read by the nodes, written outside the partition */
  const DfarmPluginTensor* const* inputs;
  int32_t num_outputs; /* written by the nodes, read outside or model outputs */
  const DfarmPluginTensor* const* outputs;
} DfarmPluginPartition;

/* Receives a one-line message; the runtime copies it before returning. */
typedef void (*DfarmPluginReportFn)(void* report_data, const char* message);

typedef struct DfarmDelegatePluginApi {
  /* DFARM_DELEGATE_PLUGIN_API_VERSION of the header the plugin was built with. */
  uint32_t api_version;
  /* Shown in placement reports ("example"); static storage. */
  const char* name;

  /* Creates a delegate from key/value options (num_options pairs; keys[i]
   * and values[i] valid only during the call). Keeps report and report_data
   * until destroy(). An unknown key or bad value: DFARM_PLUGIN_ERROR, naming it. */
  DfarmPluginStatus (*create)(const char* const* keys, const char* const* values,
                              int32_t num_options, DfarmPluginReportFn report, void* report_data,
                              DfarmPluginDelegate** delegate_out);
  void (*destroy)(DfarmPluginDelegate* delegate);

  /* OK when the plugin runs `node` (op, dtypes, shapes, activation);
   * UNSUPPORTED, with a reason reported, when not. The runtime's reference
   * kernel has accepted the node's shapes and parameters first, where it has
   * one (not for a custom op of the plugin's own), and offers no node with
   * an empty tensor (a dimension 0). */
  DfarmPluginStatus (*supports_node)(DfarmPluginDelegate* delegate, const DfarmPluginNode* node);

  /* A kernel for one partition of supported nodes; tensors have no data yet
   * (except static ones). */
  DfarmPluginStatus (*kernel_init)(DfarmPluginDelegate* delegate,
                                   const DfarmPluginPartition* partition,
                                   DfarmPluginKernel** kernel_out);
  /* (optional) Called once after every tensor has storage; pack weights here. */
  DfarmPluginStatus (*kernel_prepare)(DfarmPluginKernel* kernel,
                                      const DfarmPluginPartition* partition);
  /* Computes the partition's outputs from its inputs. Should not allocate. */
  DfarmPluginStatus (*kernel_invoke)(DfarmPluginKernel* kernel,
                                     const DfarmPluginPartition* partition);
  /* (optional) Frees a kernel from kernel_init(); called before destroy(). */
  void (*kernel_free)(DfarmPluginKernel* kernel);
} DfarmDelegatePluginApi;

/* The exported entry point: returns a table with static storage duration. */
typedef const DfarmDelegatePluginApi* (*DfarmDelegatePluginGetApiFn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DFARM_DELEGATE_PLUGIN_H_ */
