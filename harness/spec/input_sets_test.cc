#include "harness/spec/input_sets.h"

#include <gtest/gtest.h>
#include <jpeglib.h>
#include <png.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/protocol/input_set.h"

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class InputSetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dfarm_input_sets_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteFile(const fs::path& p, const std::string& bytes) {
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out << bytes;
  }

  // A width x height RGB PNG written with libpng.
  std::string WritePng(const std::string& name, uint32_t width, uint32_t height,
                       const std::vector<uint8_t>& rgb) {
    png_image png;
    std::memset(&png, 0, sizeof png);
    png.version = PNG_IMAGE_VERSION;
    png.width = width;
    png.height = height;
    png.format = PNG_FORMAT_RGB;
    std::string path = (dir_ / name).string();
    EXPECT_TRUE(png_image_write_to_file(&png, path.c_str(), 0, rgb.data(), 0, nullptr))
        << png.message;
    return path;
  }

  // A width x height RGB JPEG written with libjpeg at quality 100.
  std::string WriteJpeg(const std::string& name, uint32_t width, uint32_t height,
                        const std::vector<uint8_t>& rgb) {
    std::string path = (dir_ / name).string();
    std::FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    jpeg_compress_struct cinfo;
    jpeg_error_mgr err;
    cinfo.err = jpeg_std_error(&err);
    jpeg_create_compress(&cinfo);
    jpeg_stdio_dest(&cinfo, f);
    cinfo.image_width = width;
    cinfo.image_height = height;
    cinfo.input_components = 3;
    cinfo.in_color_space = JCS_RGB;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, 100, TRUE);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
      JSAMPROW row = const_cast<uint8_t*>(rgb.data()) + cinfo.next_scanline * width * 3;
      jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    std::fclose(f);
    return path;
  }

  std::vector<float> Floats(const std::string& bytes) {
    std::vector<float> f(bytes.size() / 4);
    std::memcpy(f.data(), bytes.data(), f.size() * 4);
    return f;
  }

  fs::path dir_;
};

// A 2x2 image: red, green / blue, white.
const std::vector<uint8_t> kPixels = {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255};

TEST_F(InputSetsTest, DecodesPngExactly) {
  auto image = DecodeImage(WritePng("a.png", 2, 2, kPixels));
  ASSERT_TRUE(image) << image.message();
  EXPECT_EQ(image->width, 2u);
  EXPECT_EQ(image->height, 2u);
  EXPECT_EQ(image->rgb, kPixels);
}

TEST_F(InputSetsTest, DecodesJpegClosely) {
  // A flat colour survives JPEG at quality 100 within a few steps.
  std::vector<uint8_t> flat;
  for (int i = 0; i < 16 * 16; ++i) flat.insert(flat.end(), {200, 100, 50});
  auto image = DecodeImage(WriteJpeg("a.jpg", 16, 16, flat));
  ASSERT_TRUE(image) << image.message();
  ASSERT_EQ(image->width, 16u);
  ASSERT_EQ(image->height, 16u);
  for (size_t i = 0; i < flat.size(); ++i) {
    ASSERT_NEAR(image->rgb[i], flat[i], 3) << "byte " << i;
  }
}

TEST_F(InputSetsTest, RefusesWhatIsNotAnImage) {
  WriteFile(dir_ / "x.png", "not a png at all");
  auto image = DecodeImage((dir_ / "x.png").string());
  ASSERT_FALSE(image);
  EXPECT_NE(image.message().find("neither a PNG nor a JPEG"), std::string::npos);
}

TEST_F(InputSetsTest, ScalesInNhwcRgbFloat) {
  auto image = DecodeImage(WritePng("a.png", 2, 2, kPixels));
  ASSERT_TRUE(image);
  ImageInputsSpec spec;
  spec.height = 2;
  spec.width = 2;
  spec.scale = 1.0 / 255;
  spec.offset = -0.5;
  auto t = ImageToTensor(*image, spec);
  ASSERT_TRUE(t) << t.message();
  std::vector<float> f = Floats(*t);
  ASSERT_EQ(f.size(), 12u);
  EXPECT_FLOAT_EQ(f[0], 0.5f);   // pixel (0,0) R
  EXPECT_FLOAT_EQ(f[1], -0.5f);  // pixel (0,0) G
  EXPECT_FLOAT_EQ(f[4], 0.5f);   // pixel (0,1) G
  EXPECT_FLOAT_EQ(f[8], 0.5f);   // pixel (1,0) B
}

TEST_F(InputSetsTest, MeanStdNchwBgr) {
  auto image = DecodeImage(WritePng("a.png", 2, 2, kPixels));
  ASSERT_TRUE(image);
  ImageInputsSpec spec;
  spec.height = 2;
  spec.width = 2;
  spec.layout = "NCHW";
  spec.channels = "BGR";
  spec.mean = {10, 20, 30};
  spec.std = {2, 4, 5};
  auto t = ImageToTensor(*image, spec);
  ASSERT_TRUE(t) << t.message();
  std::vector<float> f = Floats(*t);
  ASSERT_EQ(f.size(), 12u);
  // Plane 0 is blue: pixels red, green, blue, white -> 0, 0, 255, 255.
  EXPECT_FLOAT_EQ(f[0], (0 - 10) / 2.0f);
  EXPECT_FLOAT_EQ(f[2], (255 - 10) / 2.0f);
  // Plane 1 is green: 0, 255, 0, 255.
  EXPECT_FLOAT_EQ(f[4], (0 - 20) / 4.0f);
  EXPECT_FLOAT_EQ(f[5], (255 - 20) / 4.0f);
  // Plane 2 is red: 255, 0, 0, 255.
  EXPECT_FLOAT_EQ(f[8], (255 - 30) / 5.0f);
  EXPECT_FLOAT_EQ(f[9], (0 - 30) / 5.0f);
}

TEST_F(InputSetsTest, QuantizesGrayToInt8AndUint8) {
  auto image = DecodeImage(WritePng("a.png", 2, 2, kPixels));
  ASSERT_TRUE(image);
  ImageInputsSpec spec;
  spec.height = 2;
  spec.width = 2;
  spec.channels = "GRAY";
  spec.dtype = "uint8";
  auto u = ImageToTensor(*image, spec);
  ASSERT_TRUE(u);
  ASSERT_EQ(u->size(), 4u);
  EXPECT_EQ(static_cast<uint8_t>((*u)[0]), 76);   // 0.299 * 255 = 76.2
  EXPECT_EQ(static_cast<uint8_t>((*u)[1]), 150);  // 0.587 * 255 = 149.7
  EXPECT_EQ(static_cast<uint8_t>((*u)[3]), 255);
  spec.dtype = "int8";
  spec.quant_scale = 0.5;
  spec.quant_zero_point = -128;  // q = round(x / 0.5) - 128, saturated
  auto s = ImageToTensor(*image, spec);
  ASSERT_TRUE(s);
  EXPECT_EQ(static_cast<int8_t>((*s)[0]), 24);   // round(76.245 / 0.5) - 128
  EXPECT_EQ(static_cast<int8_t>((*s)[3]), 127);  // 510 - 128 saturates
}

TEST_F(InputSetsTest, ResizesBilinearWithHalfPixelCentres) {
  // 2x1 black | white, widened to 4: 0, 63.75, 191.25, 255.
  Image image{2, 1, {0, 0, 0, 255, 255, 255}};
  std::vector<float> out = ResizeBilinear(image, 1, 4);
  ASSERT_EQ(out.size(), 12u);
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[3], 63.75f);
  EXPECT_FLOAT_EQ(out[6], 191.25f);
  EXPECT_FLOAT_EQ(out[9], 255.0f);
}

TEST_F(InputSetsTest, ParsesRawSetFolders) {
  WriteFile(dir_ / "sets" / "b" / "input_0.bin", "bb");
  WriteFile(dir_ / "sets" / "a" / "input_0.bin", "aa");
  WriteFile(dir_ / "sets" / "a" / "input_1.bin", "a1");
  auto spec = ParseInputsSpec(json("sets"), "models[0].inputs", dir_.string());
  ASSERT_TRUE(spec) << spec.message();
  ASSERT_EQ(spec->set_dirs.size(), 2u);
  EXPECT_EQ(fs::path(spec->set_dirs[0]).filename(), "a");
  auto prepared = PrepareInputSets(*spec, (dir_ / "cache").string());
  ASSERT_TRUE(prepared) << prepared.message();
  ASSERT_EQ(prepared->size(), 2u);
  std::ifstream in((*prepared)[0].path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  auto files = agent::UnpackInputSet(bytes.str());
  ASSERT_TRUE(files) << files.message();
  EXPECT_EQ(*files, (std::vector<std::string>{"aa", "a1"}));
  EXPECT_NE((*prepared)[0].sha256, (*prepared)[1].sha256);
  // A damaged cached file (same size) is written again.
  WriteFile((*prepared)[0].path, std::string(bytes.str().size(), 'x'));
  ASSERT_TRUE(PrepareInputSets(*spec, (dir_ / "cache").string()));
  std::ifstream again((*prepared)[0].path, std::ios::binary);
  std::ostringstream again_bytes;
  again_bytes << again.rdbuf();
  EXPECT_EQ(again_bytes.str(), bytes.str());
  // One folder holding input_0.bin is one set.
  auto one = ParseInputsSpec(json((dir_ / "sets" / "b").string()), "inputs", "/");
  ASSERT_TRUE(one) << one.message();
  EXPECT_EQ(one->set_dirs.size(), 1u);
}

TEST_F(InputSetsTest, ErrorsNameTheField) {
  fs::create_directories(dir_ / "empty");
  WriteFile(dir_ / "bad" / "x" / "other.bin", "x");
  struct Case {
    json value;
    std::string message;
  } cases[] = {
      {json("nope"), "m.inputs: 'nope' is not a folder"},
      {json("empty"), "m.inputs: folder 'empty' holds neither input_0.bin nor set sub-folders"},
      {json("bad"), "has no input_0.bin"},
      {json(3), "m.inputs: expected a folder of input sets or an object"},
      {json{{"size", {2, 2}}}, "m.inputs: missing key 'images'"},
      {json{{"images", json::array()}, {"size", {2, 2}}}, "m.inputs.images: is empty"},
      {json{{"images", {"missing.png"}}, {"size", {2, 2}}},
       "m.inputs.images[0]: image 'missing.png' is not a file"},
      {json{{"images", "empty"}, {"size", {2, 2}}}, "holds no .png/.jpg/.jpeg file"},
      {json{{"images", "."}, {"size", {2, 2}}, {"colour", "RGB"}}, "unknown key 'colour'"},
  };
  WriteFile(dir_ / "a.png", "x");
  for (const Case& c : cases) {
    auto r = ParseInputsSpec(c.value, "m.inputs", dir_.string());
    ASSERT_FALSE(r) << c.value.dump();
    EXPECT_NE(r.message().find(c.message), std::string::npos)
        << c.value.dump() << ": " << r.message();
  }
  struct ImageCase {
    json extra;
    std::string message;
  } image_cases[] = {
      {json{{"size", {0, 2}}}, "m.inputs.size: height and width must be in 1..8192"},
      {json{{"size", "224"}}, "m.inputs.size: expected [height, width]"},
      {json{{"size", {2, 2}}, {"layout", "NCWH"}}, "m.inputs.layout: 'NCWH' is not one of"},
      {json{{"size", {2, 2}}, {"dtype", "float16"}}, "m.inputs.dtype: 'float16' is not one of"},
      {json{{"size", {2, 2}}, {"scale", {1, 0}}, {"mean", 1}}, "either \"scale\" or"},
      {json{{"size", {2, 2}}, {"std", {1, 0, 1}}}, "m.inputs.std: must not be 0"},
      {json{{"size", {2, 2}}, {"mean", {1, 2}}}, "m.inputs.mean: expected 1 or 3 values"},
      {json{{"size", {2, 2}}, {"quantization", {1, 0}}}, "applies to dtype uint8 or int8 only"},
  };
  for (const ImageCase& c : image_cases) {
    json v = c.extra;
    v["images"] = {"a.png"};
    auto r = ParseInputsSpec(v, "m.inputs", dir_.string());
    ASSERT_FALSE(r) << v.dump();
    EXPECT_NE(r.message().find(c.message), std::string::npos) << v.dump() << ": " << r.message();
  }
}

TEST_F(InputSetsTest, PreparesImageSetsFromAFolder) {
  WritePng("b.png", 2, 2, kPixels);
  WriteJpeg("a.jpg", 2, 2, kPixels);
  json v = {{"images", "."}, {"size", {4, 4}}, {"scale", {1.0 / 255, 0}}};
  auto spec = ParseInputsSpec(v, "inputs", dir_.string());
  ASSERT_TRUE(spec) << spec.message();
  ASSERT_EQ(spec->images.size(), 1u);
  ASSERT_EQ(spec->images[0].images.size(), 2u);
  EXPECT_EQ(fs::path(spec->images[0].images[0]).filename(), "a.jpg");
  auto prepared = PrepareInputSets(*spec, (dir_ / "cache").string());
  ASSERT_TRUE(prepared) << prepared.message();
  ASSERT_EQ(prepared->size(), 2u);
  EXPECT_EQ(fs::file_size((*prepared)[1].path), 8u + 4 + 8 + 4 * 4 * 3 * 4);
  // The spec form parses back to the same sets.
  auto again = ParseInputsSpec(spec->ToJson(), "inputs", "/");
  ASSERT_TRUE(again) << again.message();
  auto prepared_again = PrepareInputSets(*again, (dir_ / "cache").string());
  ASSERT_TRUE(prepared_again);
  EXPECT_EQ((*prepared_again)[0].sha256, (*prepared)[0].sha256);
  EXPECT_EQ((*prepared_again)[1].sha256, (*prepared)[1].sha256);
}

}  // namespace
}  // namespace dfarm::harness
