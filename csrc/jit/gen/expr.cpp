// Recursive-descent parser of the catalog expression language (expr.h).
#include "jit/gen/expr.h"

#include <cctype>
#include <map>
#include <stdexcept>

namespace flagos::kernels {
namespace {

struct Token {
  enum Type { End, Number, Name, Op } type;
  std::string text;
  size_t pos;
};

// Thrown inside the parser only; parseExpr turns it into *error.
struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<Token> tokenize(const std::string& s) {
  static const char* kTwoChar[] = {"==", "!=", "<=", ">=", "&&", "||"};
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < s.size() &&
                std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      size_t start = i;
      while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
      if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
        if (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
          i = j;
          while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
        }
      }
      out.push_back({Token::Number, s.substr(start, i - start), start});
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = i;
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      out.push_back({Token::Name, s.substr(start, i - start), start});
    } else {
      std::string two = s.substr(i, 2);
      bool matched = false;
      for (const char* t : kTwoChar) {
        if (two == t) {
          out.push_back({Token::Op, two, i});
          i += 2;
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (std::string("+-*/%!~<>&|^?:(),=").find(c) == std::string::npos) {
        throw ParseError("at " + std::to_string(i) + ": unexpected character '" +
                         std::string(1, c) + "'");
      }
      out.push_back({Token::Op, std::string(1, c), i});
      ++i;
    }
  }
  out.push_back({Token::End, "", s.size()});
  return out;
}

ExprPtr node(Expr::Kind kind, std::string text, std::vector<ExprPtr> args = {}) {
  auto e = std::make_shared<Expr>();
  e->kind = kind;
  e->text = std::move(text);
  e->args = std::move(args);
  return e;
}

ExprPtr substitute(const ExprPtr& e, const std::string& name, const ExprPtr& value) {
  if (e->kind == Expr::Kind::Name) return e->text == name ? value : e;
  if (e->args.empty()) return e;
  auto copy = std::make_shared<Expr>(*e);
  for (auto& a : copy->args) a = substitute(a, name, value);
  return copy;
}

class Parser {
 public:
  explicit Parser(const std::string& s) : tokens_(tokenize(s)) {}

  ExprPtr parseAll() {
    ExprPtr body = ternary();
    std::vector<std::pair<std::string, ExprPtr>> bindings;
    while (isName("where")) {
      next();
      if (peek().type != Token::Name) fail("expected a name after 'where'");
      std::string name = next().text;
      expect("=");
      bindings.emplace_back(name, ternary());
    }
    if (peek().type != Token::End) fail("unexpected '" + peek().text + "'");
    // A binding may use the ones after it: substitute from the last.
    for (size_t j = bindings.size(); j-- > 0;) {
      body = substitute(body, bindings[j].first, bindings[j].second);
      for (size_t k = 0; k < j; ++k) {
        bindings[k].second = substitute(bindings[k].second, bindings[j].first, bindings[j].second);
      }
    }
    return body;
  }

 private:
  const Token& peek() const { return tokens_[pos_]; }
  const Token& next() { return tokens_[pos_ == tokens_.size() - 1 ? pos_ : pos_++]; }
  bool isOp(const char* op) const { return peek().type == Token::Op && peek().text == op; }
  bool isName(const char* n) const { return peek().type == Token::Name && peek().text == n; }
  [[noreturn]] void fail(const std::string& what) const {
    const Token& t = peek();
    throw ParseError("at " + std::to_string(t.pos) + ": " + what +
                     (t.type == Token::End ? " (end of expression)" : ""));
  }
  void expect(const char* op) {
    if (!isOp(op)) {
      fail(std::string("expected '") + op + "' but found '" + peek().text + "'");
    }
    next();
  }

  ExprPtr ternary() {
    ExprPtr cond = binary(0);
    if (!isOp("?")) return cond;
    next();
    ExprPtr a = ternary();
    expect(":");
    ExprPtr b = ternary();
    return node(Expr::Kind::Ternary, "?:", {cond, a, b});
  }

  // Binary levels, loosest first.
  ExprPtr binary(size_t level) {
    static const std::vector<std::vector<std::string>> kLevels = {
        {"||"},     {"&&"},         {"|"}, {"^"}, {"&"}, {"==", "!="}, {"<", "<=", ">", ">="},
        {"+", "-"}, {"*", "/", "%"}};
    if (level == kLevels.size()) return unary();
    ExprPtr lhs = binary(level + 1);
    for (;;) {
      if (level == 6 && isName("is")) {  // `X is None`
        next();
        if (!isName("None")) fail("expected 'None' after 'is'");
        next();
        if (lhs->kind != Expr::Kind::Name) fail("'is None' needs a scalar name on its left");
        lhs = node(Expr::Kind::IsNone, lhs->text);
        continue;
      }
      if (peek().type != Token::Op) return lhs;
      bool found = false;
      for (const auto& op : kLevels[level]) found = found || peek().text == op;
      if (!found) return lhs;
      std::string op = next().text;
      lhs = node(Expr::Kind::Binary, op, {lhs, binary(level + 1)});
    }
  }

  ExprPtr unary() {
    if (isOp("-") || isOp("!") || isOp("~") || isOp("+")) {
      std::string op = next().text;
      ExprPtr operand = unary();
      return op == "+" ? operand : node(Expr::Kind::Unary, op, {operand});
    }
    return primary();
  }

  ExprPtr primary() {
    const Token& t = peek();
    if (t.type == Token::Number) {
      auto e = std::make_shared<Expr>();
      e->kind = Expr::Kind::Number;
      e->text = next().text;
      e->is_integer = e->text.find_first_of(".eE") == std::string::npos;
      return e;
    }
    if (t.type == Token::Name) {
      std::string name = next().text;
      if (!isOp("(")) return node(Expr::Kind::Name, name);
      next();
      std::vector<ExprPtr> args;
      if (!isOp(")")) {
        args.push_back(ternary());
        while (isOp(",")) {
          next();
          args.push_back(ternary());
        }
      }
      expect(")");
      return node(Expr::Kind::Call, name, std::move(args));
    }
    if (isOp("(")) {
      next();
      ExprPtr inner = ternary();
      expect(")");
      return inner;
    }
    fail(t.type == Token::End ? "expected an operand" : "unexpected '" + t.text + "'");
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace

ExprPtr parseExpr(const std::string& source, std::string* error) {
  try {
    return Parser(source).parseAll();
  } catch (const ParseError& e) {
    if (error) *error = e.what();
    return nullptr;
  }
}

void collectNames(const Expr& e, std::vector<std::string>* names) {
  if (e.kind == Expr::Kind::Name || e.kind == Expr::Kind::IsNone) names->push_back(e.text);
  for (const auto& a : e.args) collectNames(*a, names);
}

std::string toString(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Number:
    case Expr::Kind::Name:
      return e.text;
    case Expr::Kind::IsNone:
      return "(" + e.text + " is None)";
    case Expr::Kind::Unary:
      return "(" + e.text + toString(*e.args[0]) + ")";
    case Expr::Kind::Binary:
      return "(" + toString(*e.args[0]) + " " + e.text + " " + toString(*e.args[1]) + ")";
    case Expr::Kind::Ternary:
      return "(" + toString(*e.args[0]) + " ? " + toString(*e.args[1]) + " : " +
             toString(*e.args[2]) + ")";
    case Expr::Kind::Call: {
      std::string s = e.text + "(";
      for (size_t i = 0; i < e.args.size(); ++i) s += (i ? ", " : "") + toString(*e.args[i]);
      return s + ")";
    }
  }
  return "";
}

}  // namespace flagos::kernels
