// dfarm bundle EXE [--lib FILE]... [--search DIR]... [--no-loader] -o OUT [--json]
//
// Packs a runner build with the shared libraries it needs and its dynamic
// loader into one bundle (harness/run/bundle_maker.h), for a device whose own
// libc it must not depend on.
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/run/bundle_maker.h"

namespace dfarm::cli {
namespace {

struct BundleOptions {
  harness::BundleRequest req;
  bool no_loader = false;
  bool json = false;
};

// Exit codes of `dfarm bundle`.
constexpr int kExitBundleFailed = 1;

nlohmann::json ReportJson(const harness::BundleReport& r) {
  nlohmann::json files = nlohmann::json::array();
  for (const harness::BundledFile& f : r.files)
    files.push_back({{"name", f.name}, {"size", f.size}});
  return {{"path", r.path},
          {"sha256", r.sha256},
          {"machine", r.machine},
          {"loader", r.loader},
          {"files", files}};
}

void PrintReport(const harness::BundleReport& r, std::ostream& out) {
  out << r.path << ": " << r.machine << ", " << r.files.size() << " files, " << r.total_bytes
      << " bytes, loader " << (r.loader.empty() ? "none" : r.loader) << "\n";
  for (const harness::BundledFile& f : r.files) {
    out << "  " << f.name << "  " << f.size << "  " << f.host_path << "\n";
  }
  out << "sha256 " << r.sha256 << "\n";
}

int Bundle(BundleOptions& o, Context& ctx) {
  o.req.with_loader = !o.no_loader;
  auto report = harness::MakeBundle(o.req);
  if (!report) {
    const int code =
        report.error().kind == ErrorKind::kInvalidInput ? kExitUsage : kExitBundleFailed;
    ctx.Fail(code, report.message());
    return code;
  }
  if (o.json) {
    ctx.out << ReportJson(*report).dump() << "\n";
  } else {
    PrintReport(*report, ctx.out);
  }
  return kExitOk;
}

}  // namespace

void AddBundleCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<BundleOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bundle", "Pack a runner build with its shared libraries and loader into one bundle");
  cmd->add_option("EXE", o->req.exe, "the program (an ELF64 executable)")->required();
  cmd->add_option("--lib", o->req.extra_files,
                  "another file for lib/ (a dlopen()ed library, a delegate plugin); its needs "
                  "are followed too (repeatable)");
  cmd->add_option("--search", o->req.search_dirs,
                  "a library folder, searched in the order given (repeatable; default: EXE's "
                  "../lib, then the system's folders for EXE's machine)");
  cmd->add_flag("--no-loader", o->no_loader,
                "leave the dynamic loader out (the device's own starts the program)");
  cmd->add_option("-o,--output", o->req.out, "the bundle to write")->required();
  cmd->add_flag("--json", o->json,
                "print {\"path\", \"sha256\", \"machine\", \"loader\", \"files\": [{\"name\", "
                "\"size\"}]}");
  cmd->footer(
      "Layout: bin/EXE, lib/ (the libraries by their DT_NEEDED names, and the loader). A device "
      "runs it as LOADER --library-path DIR/lib DIR/bin/EXE.\nExit codes: 0 written, 1 a "
      "library was not found or OUT could not be written, 2 bad arguments or an EXE or --lib "
      "that is not an ELF64 file.");
  cmd->callback([o, &ctx] { ctx.exit_code = Bundle(*o, ctx); });
}

}  // namespace dfarm::cli
