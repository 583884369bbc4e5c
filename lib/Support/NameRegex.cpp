//===- NameRegex.cpp - Linear-time regular expressions for names ----------===//
//
// The pattern is parsed (recursive descent, one level per group, bounded)
// into a small syntax tree, which is compiled back to front into Thompson
// states: compiling a node is given the state that follows it and returns
// the node's first state, so a repeat {m,n} compiles its body m..n times
// without patching lists of dangling edges.
//
//===----------------------------------------------------------------------===//

#include "dsc/Support/NameRegex.h"

#include <algorithm>

namespace dsc {
namespace {

using Chars = std::bitset<256>;

struct Node {
  enum Kind { Set, Concat, Alt, Repeat } kind = Concat;
  Chars chars;            ///< Set
  std::vector<Node> kids; ///< Concat, Alt; Repeat's one body
  int min = 0, max = 0;   ///< Repeat; max -1: unbounded
};

unsigned char firstOf(const Chars &c) {
  unsigned x = 0;
  while (x < 255 && !c.test(x))
    ++x;
  return static_cast<unsigned char>(x);
}

Chars range(unsigned char lo, unsigned char hi) {
  Chars c;
  for (unsigned x = lo; x <= hi; ++x)
    c.set(x);
  return c;
}

Chars digits() { return range('0', '9'); }
Chars word() {
  return range('a', 'z') | range('A', 'Z') | digits() | range('_', '_');
}
Chars space() {
  Chars c;
  for (char x : std::string_view(" \t\n\r\f\v"))
    c.set(static_cast<unsigned char>(x));
  return c;
}

class Parser {
public:
  explicit Parser(std::string_view p) : p(p) {}

  Node parse() {
    Node n = alternation(0);
    if (pos < p.size()) // only an unmatched ')' stops alternation early
      fail("unbalanced ')'");
    return n;
  }

private:
  [[noreturn]] void fail(const std::string &why) const {
    throw RegexError(why + " at position " + std::to_string(pos));
  }
  bool more() const { return pos < p.size(); }
  char peek() const { return p[pos]; }

  Node alternation(int depth) {
    Node alt;
    alt.kind = Node::Alt;
    alt.kids.push_back(concatenation(depth));
    while (more() && peek() == '|') {
      ++pos;
      alt.kids.push_back(concatenation(depth));
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  Node concatenation(int depth) {
    Node cat;
    while (more() && peek() != '|' && peek() != ')') {
      Node atom = this->atom(depth);
      cat.kids.push_back(quantified(std::move(atom)));
    }
    return cat;
  }

  Node atom(int depth) {
    const char c = p[pos++];
    switch (c) {
    case '(': {
      if (depth + 1 > NameRegex::kMaxNesting) {
        --pos;
        fail("groups nested deeper than " +
             std::to_string(NameRegex::kMaxNesting));
      }
      if (more() && peek() == '?') {
        if (pos + 1 < p.size() && p[pos + 1] == ':')
          pos += 2;
        else
          fail("'(?' (lookaround, flags, named groups) is not supported");
      }
      Node inner = alternation(depth + 1);
      if (!more() || peek() != ')')
        fail("missing ')'");
      ++pos;
      return inner;
    }
    case '[':
      return set(classBody());
    case '.':
      return set(~range('\n', '\n'));
    case '\\':
      return set(escape(false));
    case '*':
    case '+':
    case '?':
      --pos;
      fail("nothing to repeat");
    case '{':
      --pos;
      if (repeatSpec(false))
        fail("nothing to repeat");
      ++pos;
      return literal(c);
    case '^':
    case '$':
      --pos;
      fail(std::string("'") + c +
           "' is supported only at the start ('^') or end ('$') of the "
           "pattern");
    default:
      return literal(c);
    }
  }

  static Node set(const Chars &chars) {
    Node n;
    n.kind = Node::Set;
    n.chars = chars;
    return n;
  }
  static Node literal(char c) {
    Chars one;
    one.set(static_cast<unsigned char>(c));
    return set(one);
  }

  /// `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` after an atom, each optionally
  /// lazy; a second quantifier is Python's "multiple repeat".
  Node quantified(Node body) {
    if (!more())
      return body;
    int min = 0, max = 0;
    const char c = peek();
    if (c == '*')
      max = -1;
    else if (c == '+')
      min = 1, max = -1;
    else if (c == '?')
      max = 1;
    else if (c != '{' || !repeatSpec(true, &min, &max))
      return body;
    if (c != '{')
      ++pos;
    if (more() && peek() == '?')
      ++pos; // lazy: the same names fullmatch
    if (more() && (peek() == '*' || peek() == '+' || peek() == '?' ||
                   (peek() == '{' && repeatSpec(false))))
      fail("multiple repeat");
    Node r;
    r.kind = Node::Repeat;
    r.min = min;
    r.max = max;
    r.kids.push_back(std::move(body));
    return r;
  }

  /// Whether `{m}`, `{m,}` or `{m,n}` starts at pos (otherwise `{` is a
  /// literal, as in Python); with `consume`, reads it past the `}`.
  bool repeatSpec(bool consume, int *min = nullptr, int *max = nullptr) {
    size_t i = pos;
    if (i >= p.size() || p[i] != '{')
      return false;
    ++i;
    // Counts saturate: anything this large exceeds kMaxStates anyway.
    auto number = [&](long &v) {
      const size_t s = i;
      v = 0;
      while (i < p.size() && p[i] >= '0' && p[i] <= '9')
        v = std::min(v * 10 + (p[i++] - '0'), 1000000L);
      return i > s;
    };
    long lo = 0, hi = 0;
    const bool hasLo = number(lo);
    hi = lo;
    if (i < p.size() && p[i] == ',') { // {m,n}, {m,}, {,n} (m = 0)
      ++i;
      if (!number(hi))
        hi = -1;
    } else if (!hasLo) {
      return false;
    }
    if (i >= p.size() || p[i] != '}')
      return false;
    if (!consume)
      return true;
    pos = i + 1;
    if (hi != -1 && hi < lo)
      fail("repeat {" + std::to_string(lo) + "," + std::to_string(hi) +
           "} has its maximum below its minimum");
    *min = int(lo);
    *max = int(hi);
    return true;
  }

  /// The escape after a backslash (pos is past the backslash).
  Chars escape(bool inClass) {
    if (!more())
      fail("trailing backslash");
    const char c = p[pos++];
    switch (c) {
    case 'd':
      return digits();
    case 'D':
      return ~digits();
    case 'w':
      return word();
    case 'W':
      return ~word();
    case 's':
      return space();
    case 'S':
      return ~space();
    case 'n':
      return range('\n', '\n');
    case 't':
      return range('\t', '\t');
    case 'r':
      return range('\r', '\r');
    case 'f':
      return range('\f', '\f');
    case 'v':
      return range('\v', '\v');
    default:
      break;
    }
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
        (c >= 'A' && c <= 'Z')) {
      --pos;
      fail(std::string("escape '\\") + c + "' is not supported" +
           (inClass ? " in a class" : ""));
    }
    return range(static_cast<unsigned char>(c), static_cast<unsigned char>(c));
  }

  /// The characters of a class (pos is past the '[').
  Chars classBody() {
    const size_t open = pos - 1;
    bool negate = false;
    if (more() && peek() == '^') {
      negate = true;
      ++pos;
    }
    Chars chars;
    bool first = true;
    while (true) {
      if (!more()) {
        pos = open;
        fail("unterminated character class");
      }
      char c = p[pos++];
      if (c == ']' && !first)
        break;
      first = false;
      Chars item;
      if (c == '\\') {
        item = escape(true);
        // A range bound must be one character.
        if (item.count() != 1) {
          chars |= item;
          continue;
        }
      } else {
        item.set(static_cast<unsigned char>(c));
      }
      if (pos + 1 < p.size() && peek() == '-' && p[pos + 1] != ']') {
        ++pos;
        unsigned char hi = static_cast<unsigned char>(p[pos++]);
        if (hi == '\\') {
          Chars h = escape(true);
          if (h.count() != 1)
            fail("a class range ends in a set");
          hi = firstOf(h);
        }
        const unsigned char lo = firstOf(item);
        if (hi < lo)
          fail("bad character range");
        item = range(lo, hi);
      }
      chars |= item;
    }
    return negate ? ~chars : chars;
  }

  std::string_view p;
  size_t pos = 0;
};

class Compiler {
public:
  explicit Compiler(std::vector<NameRegex::State> &states) : states(states) {}

  /// The first state of `n`, whose last states go to `next`.
  int compile(const Node &n, int next) {
    switch (n.kind) {
    case Node::Set: {
      NameRegex::State s;
      s.chars = n.chars;
      s.next = next;
      return add(s);
    }
    case Node::Concat:
      for (auto it = n.kids.rbegin(); it != n.kids.rend(); ++it)
        next = compile(*it, next);
      return next;
    case Node::Alt: {
      int s = compile(n.kids.back(), next);
      for (size_t i = n.kids.size() - 1; i-- > 0;)
        s = split(compile(n.kids[i], next), s);
      return s;
    }
    case Node::Repeat: {
      const Node &body = n.kids[0];
      int s = next;
      if (n.max < 0) {
        // The loop: try the body again or leave.
        const int loop = split(-1, next);
        const int first = compile(body, loop);
        states[size_t(loop)].next = first;
        s = loop;
      } else {
        for (int i = n.min; i < n.max; ++i)
          s = split(compile(body, s), next);
      }
      for (int i = 0; i < n.min; ++i)
        s = compile(body, s);
      return s;
    }
    }
    return next;
  }

private:
  int add(const NameRegex::State &s) {
    if (states.size() >= NameRegex::kMaxStates)
      throw RegexError("the pattern needs more than " +
                       std::to_string(NameRegex::kMaxStates) +
                       " automaton states (repeat counts multiply it)");
    states.push_back(s);
    return int(states.size() - 1);
  }
  int split(int a, int b) {
    NameRegex::State s;
    s.split = true;
    s.next = a;
    s.alt = b;
    return add(s);
  }

  std::vector<NameRegex::State> &states;
};

/// Whether p[i] is preceded by an odd number of backslashes.
bool escaped(std::string_view p, size_t i) {
  size_t n = 0;
  while (i > n && p[i - n - 1] == '\\')
    ++n;
  return n % 2 == 1;
}

} // namespace

NameRegex::NameRegex(std::string_view pattern) {
  // fullmatch anchors both ends already: a leading '^' and a trailing
  // unescaped '$' change nothing.
  if (!pattern.empty() && pattern.front() == '^')
    pattern.remove_prefix(1);
  if (!pattern.empty() && pattern.back() == '$' &&
      !escaped(pattern, pattern.size() - 1))
    pattern.remove_suffix(1);
  const Node root = Parser(pattern).parse();
  states.push_back(State{}); // state 0 accepts
  start = Compiler(states).compile(root, 0);
}

bool NameRegex::fullMatch(std::string_view name) const {
  // The live states after each character, closed over epsilon moves
  // (iteratively: patterns like (a*)* have epsilon cycles).
  std::vector<int> live, nextLive, stack;
  std::vector<size_t> seen(states.size(), 0);
  size_t generation = 0;
  auto close = [&](int first, std::vector<int> &into) {
    stack.assign(1, first);
    while (!stack.empty()) {
      const int s = stack.back();
      stack.pop_back();
      if (seen[size_t(s)] == generation)
        continue;
      seen[size_t(s)] = generation;
      const State &st = states[size_t(s)];
      if (st.split) {
        stack.push_back(st.alt);
        stack.push_back(st.next);
      } else {
        into.push_back(s);
      }
    }
  };
  ++generation;
  close(start, live);
  for (char c : name) {
    ++generation;
    nextLive.clear();
    for (int s : live) {
      const State &st = states[size_t(s)];
      if (s != 0 && st.chars.test(static_cast<unsigned char>(c)))
        close(st.next, nextLive);
    }
    live.swap(nextLive);
    if (live.empty())
      return false;
  }
  for (int s : live)
    if (s == 0)
      return true;
  return false;
}

} // namespace dsc
