// ordorun's pure parts: the line prefixer, and how a rank's launch is planned (where the store
// token goes).
#include <catch2/catch.hpp>
#include <string>
#include <string_view>

#include "prefixer.hpp"
#include "spawner.hpp"

using ordorun::JobLaunch;
using ordorun::LinePrefixer;
using ordorun::RankPlace;

TEST_CASE("the prefixer passes whole lines on, each with its prefix", "[ordorun]") {
  LinePrefixer p("[3] ");
  CHECK(p.feed("hel") == "");
  CHECK(p.feed("lo\nwor") == "[3] hello\n");
  CHECK(p.feed("ld\n\nlast") == "[3] world\n[3] \n");
  CHECK(p.finish() == "[3] last\n");
  CHECK(p.finish() == "");
  CHECK(p.feed("x\n") == "[3] x\n");
  CHECK(p.finish() == "");
}

// One 200 KB line held whole cost ordorun its size in memory (and, fed 64 KiB at a time, a
// scan of all of it per read): it is passed on in pieces of at most max_line bytes, each a
// prefixed line, which put together are the line.
TEST_CASE("the prefixer splits an overlong line into bounded pieces", "[ordorun]") {
  constexpr std::size_t most = LinePrefixer::max_line;
  LinePrefixer p("[1] ");
  std::string line;
  for (std::size_t i = 0; line.size() < 3 * most + 100; ++i) line += char('a' + i % 26);
  std::string out;
  for (std::size_t at = 0; at < line.size(); at += 4096) {
    out += p.feed(std::string_view(line).substr(at, 4096));
    if (at >= most) CHECK_FALSE(out.empty());  // passed on once a piece is full, not at the end
  }
  out += p.feed("\n");
  std::string joined;
  std::size_t pieces = 0, start = 0;
  for (std::size_t nl; (nl = out.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string piece = out.substr(start, nl - start);
    REQUIRE(piece.rfind("[1] ", 0) == 0);
    CHECK(piece.size() - 4 <= most);
    joined += piece.substr(4);
    ++pieces;
  }
  CHECK(start == out.size());
  CHECK(pieces == 4);
  CHECK(joined == line);
  // A piece ends before a UTF-8 character, never inside it: "é" (2 bytes) across the bound.
  LinePrefixer q("");
  const std::string text = std::string(most - 1, 'x') + "\xc3\xa9" + "yz\n";
  const std::string split = q.feed(text);
  CHECK(split == std::string(most - 1, 'x') + "\n\xc3\xa9yz\n");
}

namespace {

JobLaunch job() {
  JobLaunch j;
  j.size = 4;
  j.command = {"prog", "two words", "it's"};
  j.token = "feedfacefeedfacefeedfacefeedface";
  j.bootstrap_timeout = "32";
  return j;
}

RankPlace place(bool remote) {
  RankPlace p;
  p.rank = 2;
  p.host = "node7";
  p.remote = remote;
  p.local_rank = 1;
  p.local_size = 2;
  p.store = "10.0.0.1:5555";
  return p;
}

bool mentions(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v)
    if (x.find(s) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("a local rank gets the token in its environment", "[ordorun]") {
  const auto l = ordorun::plan_launch(place(false), job());
  CHECK(l.argv == job().command);
  CHECK(mentions(l.env, "ORDO_STORE_TOKEN=feedfacefeedfacefeedfacefeedface"));
  CHECK(mentions(l.env, "ORDO_RANK=2"));
  CHECK(mentions(l.env, "ORDO_LOCAL_RANK=1"));
  CHECK(mentions(l.env, "ORDO_STORE=10.0.0.1:5555"));
  CHECK(l.stdin_data.empty());
}

TEST_CASE("a remote rank's token goes to standard input, never on a command line", "[ordorun]") {
  for (const std::string rsh : {"ssh", "/usr/bin/ssh -p 2222", "ip netns exec"}) {
    INFO(rsh);
    JobLaunch j = job();
    j.rsh = rsh;
    const auto l = ordorun::plan_launch(place(true), j);
    CHECK_FALSE(mentions(l.argv, j.token));
    CHECK_FALSE(mentions(l.env, j.token));
    CHECK(l.stdin_data == j.token + "\n");
    CHECK(mentions(l.argv, "ORDO_RANK=2"));
    CHECK(mentions(l.argv, "node7"));
    if (rsh.find("ssh") != std::string::npos) {
      CHECK(l.argv.back().find("'two words'") != std::string::npos);  // one string, quoted
    } else {
      CHECK(l.argv.back() == "it's");  // separate arguments
    }
  }
}
