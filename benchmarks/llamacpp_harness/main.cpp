// Timing harness for llama.cpp's chat auto-parser, driven by benchmarks/analysis_speed.py --llama-cpp.
//
// Protocol: takes the request's tools as JSON (its one argument), reads template paths on stdin,
// one per line, and answers each at once with one line
//
//     wall_ms<TAB>cpu_ms<TAB>analysis_wall_ms<TAB>status<TAB>path
//
// after timing, cold (nothing is kept from one template to the next), what llama.cpp does for it:
//
//   1. load: read the file, apply the two source patches common_chat_templates_init applies, and
//      build a common_chat_template (jinja lex + parse, then jinja::caps_get);
//   2. autoparser::autoparser::analyze_template (the differential analysis);
//   3. autoparser::peg_generator::generate_parser without tools and, where the template supports
//      tools (caps.supports_tools: it renders the tool list, as our Caps.supports_tools), again
//      with the same two-tool request as ours (parser, GBNF grammar, triggers).
//
// wall_ms covers 1-3 (std::chrono::steady_clock), cpu_ms the process' CPU time over 1-3
// (CLOCK_PROCESS_CPUTIME_ID), analysis_wall_ms 1-2. status is "ok" or a short error word naming
// the step that threw: read_error, load_error, analysis_error, generation_error (the exception's
// message goes to stderr, one line); the times are then those up to the failure.
//
// The auto-parser is timed directly: it leaves out common_chat_try_specialized_template, by which
// llama.cpp's server sends a few template families (GPT-OSS, Qwen3-Coder, Kimi K2, ...) to a
// hand-written parser instead, and the message workarounds of common_chat_templates_apply.
//
// Built against the llama.cpp of the llama-cpp-python 0.3.36 sdist (vendor/llama.cpp) by
// benchmarks/build_llamacpp_harness.py; see benchmarks/llamacpp_harness/CMakeLists.txt.

#include "chat-auto-parser.h"
#include "chat.h"
#include "common.h"
#include "json.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

// The special tokens our side renders a bare .jinja file with (analyzer.load.STAND_IN_TOKENS).
const std::string BOS_TOKEN = "<s>";
const std::string EOS_TOKEN = "</s>";

// The request a server would render the prompt of: one user message, generation prompt added.
const char * MESSAGES_JSON = R"([{"role": "user", "content": "Hello"}])";


double cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

std::string read_file(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw std::runtime_error("cannot open " + path);
    }
    std::ostringstream out;
    out << in.rdbuf();
    if (in.bad()) {
        throw std::runtime_error("cannot read " + path);
    }
    return out.str();
}

// What common_chat_templates_init does to a template's source before parsing it.
void patch_source(std::string & src) {
    if (src.find("<|channel|>") != std::string::npos && src.find("in message.content or") != std::string::npos) {
        string_replace_all(src,
                           "{%- if \"<|channel|>analysis<|message|>\" in message.content or "
                           "\"<|channel|>final<|message|>\" in message.content %}",
                           "{%- if false %}");
    }
    if (src.find("[TOOL_CALLS]") != std::string::npos && src.find("if (message['content'] is none or") != std::string::npos) {
        string_replace_all(src,
                           "{%- if (message['content'] is none or message['content'] == '' or "
                           "message['content']|length == 0) and (message['tool_calls'] is not defined or "
                           "message['tool_calls'] is none or message['tool_calls']|length == 0) %}",
                           "{%- if false %}");
    }
}

autoparser::generation_params request(const char * tools_json) {
    autoparser::generation_params params;
    params.messages              = common_json::parse(MESSAGES_JSON);
    params.add_generation_prompt = true;
    if (tools_json != nullptr) {
        params.tools = common_json::parse(tools_json);
    }
    return params;
}

std::string one_line(std::string s) {
    for (char & c : s) {
        if (c == '\n' || c == '\r' || c == '\t') {
            c = ' ';
        }
    }
    return s;
}

void answer(const std::string & path, const autoparser::generation_params & plain_request,
            const autoparser::generation_params & tools_request) {
    using clock = std::chrono::steady_clock;
    const char * step = "read_error";
    double analysis_ms = 0.0;

    const auto t0 = clock::now();
    const double c0 = cpu_ms();
    try {
        std::string src = read_file(path);

        step = "load_error";
        patch_source(src);
        common_chat_template tmpl(src, BOS_TOKEN, EOS_TOKEN);

        step = "analysis_error";
        autoparser::autoparser analysis;
        analysis.analyze_template(tmpl);
        analysis_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();

        step = "generation_error";
        common_chat_params plain = autoparser::peg_generator::generate_parser(tmpl, plain_request, analysis);
        (void) plain;
        if (tmpl.original_caps().supports_tools) {
            common_chat_params with_tools = autoparser::peg_generator::generate_parser(tmpl, tools_request, analysis);
            (void) with_tools;
        }
        step = "ok";
    } catch (const std::exception & e) {
        std::fprintf(stderr, "%s: %s: %s\n", path.c_str(), step, one_line(e.what()).c_str());
    } catch (...) {
        std::fprintf(stderr, "%s: %s: unknown exception\n", path.c_str(), step);
    }
    const double c1 = cpu_ms();
    const double wall_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (analysis_ms == 0.0) {
        analysis_ms = wall_ms;  // failed before the analysis ended: the time up to the failure
    }
    std::fprintf(stdout, "%.3f\t%.3f\t%.3f\t%s\t%s\n", wall_ms, c1 - c0, analysis_ms, step, path.c_str());
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char ** argv) {
    // the tools of the request with tools: benchmarks/analysis_speed.py passes its own TOOLS, as JSON
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s TOOLS_JSON < template paths\n", argv[0]);
        return 2;
    }
    // built once, as ours are module constants: the timed calls get them ready-made
    const autoparser::generation_params plain_request = request(nullptr);
    const autoparser::generation_params tools_request = request(argv[1]);
    std::string line;
    while (std::getline(std::cin, line)) {
        if (!line.empty() && line.back() == '\r') {
            line.pop_back();
        }
        answer(line, plain_request, tools_request);  // every line gets its answer, so the caller stays in step
    }
    return 0;
}
