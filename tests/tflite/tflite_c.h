// A TensorFlow Lite interpreter reached through TFLite's C API in a shared
// library loaded at run time (dlopen): the reference the TFLite cross-check
// (tflite_cross_check_test.cc) and benchmark compare DelegateFarm with.
// scripts/setup.sh installs TFLite 2.9's prebuilt libtensorflowlite_c.so
// (npm tfjs-tflite-node) in .cache/tflite/<arch>/. The few C API entry points
// used are declared here from TFLite's documented, stable C API; nothing of
// TFLite is compiled into DelegateFarm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dfarm::tflite_ref {

// TfLiteType values of the C API (the schema's TensorType differs).
enum class CType : int {
  kNoType = 0,
  kFloat32 = 1,
  kInt32 = 2,
  kUInt8 = 3,
  kInt64 = 4,
  kString = 5,
  kBool = 6,
  kInt16 = 7,
  kComplex64 = 8,
  kInt8 = 9,
  kFloat16 = 10,
};

struct TensorData {
  CType type = CType::kNoType;
  std::vector<int32_t> shape;
  float scale = 0.0f;  // quantization (scale 0: none)
  int32_t zero_point = 0;
  std::vector<uint8_t> bytes;
};

class Library;

// One model in one interpreter: default kernels (what TfLiteInterpreterCreate
// applies), or with TFLite's XNNPACK delegate.
class Interpreter {
 public:
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  size_t num_inputs() const;
  size_t num_outputs() const;
  TensorData Input(size_t i) const;  // type, shape, quantization; bytes empty
  // Copies `bytes` (exactly the tensor's size) into input i; false on a size mismatch.
  bool SetInput(size_t i, const std::vector<uint8_t>& bytes);
  bool Invoke();  // false: TFLite's error text is in last_error()
  // Runs Invoke() `runs` times (steady clock); the mean per run in `mean_us`.
  // False (last_error() says why) when an Invoke() fails or runs < 1.
  bool TimeInvokes(int runs, double* mean_us);
  TensorData Output(size_t i) const;
  const std::string& last_error() const;

 private:
  friend class Library;
  struct State;
  explicit Interpreter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class Library {
 public:
  // Loads the library at `path`; null with `error` naming the path or the
  // missing symbol when it cannot.
  static std::unique_ptr<Library> Load(const std::string& path, std::string* error);
  ~Library();

  std::string Version() const;  // TfLiteVersion(): "2.9.0"
  // An interpreter for the .tflite `model` bytes (copied), allocated.
  // threads: TfLiteInterpreterOptionsSetNumThreads; xnnpack_threads > 0 adds
  // TFLite's XNNPACK delegate with that many threads. Null with `error`
  // (TFLite's own messages) when TFLite refuses the model.
  std::unique_ptr<Interpreter> Create(const std::vector<uint8_t>& model, int threads,
                                      int xnnpack_threads, std::string* error) const;

  struct Api;

 private:
  Library() = default;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
};

// The library's default place: $DFARM_TFLITE_LIB, else `fallback` (the
// build's .cache/tflite/<arch>/libtensorflowlite_c.so).
std::string DefaultLibraryPath(const std::string& fallback);

}  // namespace dfarm::tflite_ref
