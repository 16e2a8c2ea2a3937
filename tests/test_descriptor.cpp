// The descriptor parser (bench/descriptor.h): what each family's descriptor
// reads, that every bad input is refused with the field named, the batch
// file's line numbers, and that the shipped batch files (shapes/) hold what
// the networks' own descriptions (kernels/nn/model/network.cpp) give.
#include "bench/descriptor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "kernels/common/error.h"
#include "kernels/nn/model/network.h"

namespace dlb::bench {
namespace {

// The message of the dlb::Error `f` throws; fails the test where it throws none.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no dlb::Error";
  return {};
}

TEST(Descriptor, ReadsEveryFamily) {
  const SoftmaxShape softmax = parse_softmax_descriptor("cols:1024/rows:128");  // any order
  EXPECT_EQ(softmax.rows, 128);
  EXPECT_EQ(softmax.cols, 1024);
  EXPECT_EQ(softmax.descriptor(), "rows:128/cols:1024");
  const GemmShape gemm = parse_gemm_descriptor("m:64/n:10/k:512");
  EXPECT_EQ(std::tie(gemm.m, gemm.n, gemm.k), std::make_tuple(64, 10, 512));
  EXPECT_EQ(parse_daxpy_descriptor("n:1000").n, 1000);
  EXPECT_EQ(parse_daxpy_descriptor("n:1M").n, 1 << 20);
  EXPECT_EQ(parse_copy_descriptor("bytes:4K").bytes, 4096);
  EXPECT_EQ(parse_copy_descriptor("bytes:3m").bytes, 3 << 20);
  EXPECT_EQ(parse_copy_descriptor("bytes:1G").bytes, 1 << 30);
  EXPECT_EQ(parse_copy_descriptor("bytes:1024G").bytes, kMaxCopyBytes);
  const NetShape net = parse_net_descriptor("mnist_lenet/batch:8");
  EXPECT_EQ(net.network, "mnist_lenet");
  EXPECT_EQ(net.batch, 8);
  EXPECT_FALSE(net.train());
  const NetShape train = parse_net_descriptor("resnet20_train/batch:60000");
  EXPECT_TRUE(train.train());
  EXPECT_EQ(train.base(), "resnet20");
  EXPECT_EQ(train.descriptor(), "resnet20_train/batch:60000");
  EXPECT_EQ(parse_softmax_descriptor("rows:2147483647/cols:1").rows, kMaxIntDimension);
}

TEST(Descriptor, SizeText) {
  EXPECT_EQ(size_text(4096), "4K");
  EXPECT_EQ(size_text(std::int64_t{3} << 30), "3G");
  EXPECT_EQ(size_text(1000), "1000");
  EXPECT_EQ(size_text(kMaxCopyBytes), "1024G");
}

TEST(Descriptor, BadInputNamesTheField) {
  const std::pair<std::function<void()>, std::string> cases[] = {
      {[] { parse_softmax_descriptor(""); }, "softmax descriptor '': empty (fields rows cols; e.g. rows:128/cols:1024)"},
      {[] { parse_softmax_descriptor("rows:0/cols:5"); }, "softmax descriptor 'rows:0/cols:5': rows must be at least 1, got 0"},
      {[] { parse_softmax_descriptor("rows:-3/cols:5"); }, "field 'rows' must be an integer, got '-3'"},
      {[] { parse_softmax_descriptor("rows:3/cols:5/rows:4"); }, "field 'rows' given twice"},
      {[] { parse_softmax_descriptor("rows:3"); }, "field 'cols' is missing"},
      {[] { parse_softmax_descriptor("rows:3/cols:5/depth:2"); }, "unknown field 'depth' (fields rows cols;"},
      {[] { parse_softmax_descriptor("rows:3/cols:"); }, "field 'cols' has no value (an integer from 1 to 2147483647"},
      {[] { parse_softmax_descriptor("rows:3//cols:5"); }, "an empty field"},
      {[] { parse_softmax_descriptor("rows:3/cols:5/"); }, "an empty field"},
      {[] { parse_softmax_descriptor("rows3/cols:5"); }, "unknown field 'rows3'"},
      {[] { parse_softmax_descriptor("rows/cols:5"); }, "field 'rows' needs ':' and a value"},
      {[] { parse_softmax_descriptor("rows:1K/cols:5"); }, "field 'rows' must be an integer, got '1K'"},
      {[] { parse_softmax_descriptor("rows:2147483648/cols:5"); },
       "rows 2147483648 is past the limit 2147483647 (an integer from 1 to 2147483647, the int dimensions of"},
      {[] { parse_softmax_descriptor("rows:99999999999999999999999/cols:5"); }, "is past the limit 2147483647"},
      {[] { parse_gemm_descriptor("m:64/n:10"); }, "gemm descriptor 'm:64/n:10': field 'k' is missing (fields m n k;"},
      {[] { parse_gemm_descriptor("m:64/n:10/k:0x10"); }, "field 'k' must be an integer, got '0x10'"},
      {[] { parse_gemm_descriptor("m:64/n:10/k:1.5"); }, "field 'k' must be an integer, got '1.5'"},
      {[] { parse_gemm_descriptor("m:64/n:10/k: 5"); }, "field 'k' must be an integer, got ' 5'"},
      {[] { parse_daxpy_descriptor("n:3G"); }, "n 3G is past the limit 2147483647 (an integer from 1 to 2147483647, cuBLAS's int n)"},
      {[] { parse_daxpy_descriptor("n:0K"); }, "n must be at least 1, got 0K"},
      {[] { parse_daxpy_descriptor("n:K"); }, "field 'n' must be an integer (suffix K, M or G), got 'K'"},
      {[] { parse_daxpy_descriptor("n:4T"); }, "field 'n' must be an integer (suffix K, M or G), got '4T'"},
      {[] { parse_copy_descriptor("bytes:1025G"); }, "bytes 1025G is past the limit 1024G (an integer from 1 to 1024G, 1 TiB)"},
      {[] { parse_copy_descriptor("size:4K"); }, "unknown field 'size' (fields bytes; e.g. bytes:64M)"},
      {[] { parse_net_descriptor("resnet18/batch:8"); },
       "net descriptor 'resnet18/batch:8': unknown network 'resnet18' (networks: resnet20 resnet20_train mnist_cnn"},
      {[] { parse_net_descriptor("/batch:8"); }, "no network"},
      {[] { parse_net_descriptor("resnet20"); }, "net descriptor 'resnet20': field 'batch' is missing"},
      {[] { parse_net_descriptor("resnet20/batch:10001"); },
       "net descriptor 'resnet20/batch:10001': batch 10001 is past the limit 10000 (an integer from 1 to 10000, the "
       "images of the Fashion-MNIST test set)"},
      {[] { parse_net_descriptor("resnet20_train/batch:60001"); }, "batch 60001 is past the limit 60000"},
      {[] { parse_net_descriptor("resnet20/batch:8/batch:9"); }, "net descriptor 'resnet20/batch:8/batch:9': field 'batch' given twice"},
      {[] { parse_net_descriptor("resnet20/threads:2"); }, "unknown field 'threads' (fields batch; e.g. resnet20/batch:64)"},
  };
  for (const auto& [parse, message] : cases) {
    const std::string got = error_of(parse);
    EXPECT_NE(got.find(message), std::string::npos) << "got: " << got << "\nwant: " << message;
  }
}

TEST(Descriptor, AddDescriptorKeepsEachProblemOnce) {
  Descriptors d;
  add_descriptor("gemm", "m:1/n:2/k:3", d);
  add_descriptor("gemm", "k:3/n:2/m:1", d);  // the same problem
  add_descriptor("gemm", "m:1/n:2/k:4", d);
  add_descriptor("conv", "n1c3h8k4r3,n1c3h8w8k4r3s3stride1pad0", d);  // the same, written twice
  add_descriptor("net", "resnet20/batch:1", d);
  add_descriptor("net", "resnet20_train/batch:1", d);
  EXPECT_EQ(d.gemm.size(), 2u);
  EXPECT_EQ(d.conv.size(), 1u);
  EXPECT_EQ(d.net.size(), 2u);
  EXPECT_EQ(d.size(), 5u);
  EXPECT_NE(error_of([&] { add_descriptor("matmul", "m:1/n:2/k:3", d); })
                .find("unknown family 'matmul' (families: conv softmax gemm daxpy copy net)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { add_descriptor("conv", "n1c3h8k4r3,n0c3h8k4r3", d); }).find("n must be a positive"),
            std::string::npos);
}

TEST(ShapesFile, ReadsLinesCommentsAndBlanks) {
  const Descriptors d = parse_shapes_file(
      "# a comment\n"
      "\n"
      "conv n64c16h32w32k16r3s3stride1pad1   # trailing comment\n"
      "  gemm\tm:64/n:10/k:512\r\n"
      "softmax rows:128/cols:1024\n"
      "daxpy n:1M\n"
      "copy bytes:4K\n"
      "net resnet20/batch:8\n"
      "net mnist_cnn_train/batch:64",  // no newline at the end
      "f.txt");
  ASSERT_EQ(d.conv.size(), 1u);
  EXPECT_EQ(d.conv[0].descriptor(), "n64c16h32w32k16r3s3stride1pad1");
  ASSERT_EQ(d.gemm.size(), 1u);
  EXPECT_EQ(d.gemm[0].k, 512);
  EXPECT_EQ(d.softmax.size(), 1u);
  EXPECT_EQ(d.daxpy.at(0).n, 1 << 20);
  EXPECT_EQ(d.copy.at(0).bytes, 4096);
  ASSERT_EQ(d.net.size(), 2u);
  EXPECT_EQ(d.net[1].network, "mnist_cnn_train");
}

TEST(ShapesFile, ListsEveryBadLineWithItsNumber) {
  const std::string message = error_of([] {
    parse_shapes_file(
        "gemm m:64/n:10/k:512\n"
        "gemm m:0/n:10/k:512\n"  // 2
        "# fine\n"
        "matmul m:1/n:1/k:1\n"  // 4
        "softmax\n"  // 5
        "softmax rows:1 /cols:2\n"  // 6
        "conv n1c1h2k1r5\n"  // 7
        "net resnet20/batch:8\n",
        "my.txt");
  });
  EXPECT_NE(message.find("my.txt: 5 bad lines, nothing run:"), std::string::npos) << message;
  EXPECT_NE(message.find("\n  my.txt:2: gemm descriptor 'm:0/n:10/k:512': m must be at least 1, got 0"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("\n  my.txt:4: unknown family 'matmul'"), std::string::npos) << message;
  EXPECT_NE(message.find("\n  my.txt:5: 'softmax': expected '<family> <descriptor>'"), std::string::npos) << message;
  EXPECT_NE(message.find("\n  my.txt:6: 'softmax rows:1 /cols:2': one descriptor a line"), std::string::npos)
      << message;
  EXPECT_NE(message.find("\n  my.txt:7: conv descriptor 'n1c1h2k1r5': "), std::string::npos) << message;
  EXPECT_EQ(message.find("my.txt:1:"), std::string::npos) << message;
  EXPECT_EQ(message.find("my.txt:8:"), std::string::npos) << message;
}

TEST(ShapesFile, ListsTheFirstThousandBadLinesAndCountsAll) {
  std::string text;
  for (int i = 0; i < 1500; ++i) text += "gemm m:0/n:1/k:1\n";
  const std::string message = error_of([&] { parse_shapes_file(text, "big.txt"); });
  EXPECT_NE(message.find("big.txt: 1500 bad lines, nothing run:"), std::string::npos);
  EXPECT_NE(message.find("big.txt:1000: gemm"), std::string::npos);
  EXPECT_EQ(message.find("big.txt:1001:"), std::string::npos);
  EXPECT_NE(message.find("\n  ... and 500 more"), std::string::npos);
}

TEST(ShapesFile, EmptyFileIsAnError) {
  EXPECT_NE(error_of([] { parse_shapes_file("# only a comment\n\n", "e.txt"); }).find("e.txt: no descriptor in the file"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_shapes_file("", "e.txt"); }).find("no descriptor"), std::string::npos);
}

TEST(Descriptor, NetworksAreTheNetworkTable) {
  const auto names = nn::network_names();
  EXPECT_TRUE(std::equal(std::begin(kDescriptorNetworks), std::end(kDescriptorNetworks), names.begin(), names.end()));
}

// ----------------------------------------------------------- shapes/*.txt

Descriptors shipped(const std::string& name) {
  const std::string path = std::string(DLB_SOURCE_DIR) + "/shapes/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_shapes_file(text.str(), path);
}

TEST(ShippedShapes, Resnet20ConvIsEveryConvOfTheNetworkAtBatch64) {
  std::set<std::string> expected;
  for (const nn::Layer& l : nn::network("resnet20").layers) {
    if (l.kind != nn::LayerKind::conv) continue;
    const ConvShape s{64, l.c, l.h, l.w, l.k, l.window, l.window, l.stride, l.pad};
    ASSERT_EQ(s.oh(), l.oh) << l.name;
    expected.insert(s.descriptor());
  }
  EXPECT_EQ(expected.size(), 8u);  // downsample's two 1x1 convs among them
  std::set<std::string> listed;
  const Descriptors d = shipped("resnet20_conv.txt");
  for (const ConvShape& s : d.conv) listed.insert(s.descriptor());
  EXPECT_EQ(d.size(), d.conv.size());
  EXPECT_EQ(listed, expected);
}

TEST(ShippedShapes, NetworkGemmsAreTheFcAndIm2colGemmsOfTheThreeNetworks) {
  std::set<std::string> expected;
  for (const std::string_view name : nn::network_names()) {
    for (const nn::Layer& l : nn::network(name).layers) {
      if (l.kind == nn::LayerKind::fc) {
        for (const std::int64_t batch : {1, 64}) expected.insert(GemmShape{batch, l.k, l.in_size()}.descriptor());
      } else if (l.kind == nn::LayerKind::conv) {
        // conv's cpu_im2col: per image, Y[k, oh*ow] = W[k, c*r*s] * patches.
        expected.insert(GemmShape{l.k, l.oh * l.ow, l.c * l.window * l.window}.descriptor());
      }
    }
  }
  std::set<std::string> listed;
  const Descriptors d = shipped("network_gemms.txt");
  for (const GemmShape& s : d.gemm) listed.insert(s.descriptor());
  EXPECT_EQ(d.size(), d.gemm.size());
  EXPECT_EQ(d.gemm.size(), listed.size());
  EXPECT_EQ(listed, expected);
}

}  // namespace
}  // namespace dlb::bench
