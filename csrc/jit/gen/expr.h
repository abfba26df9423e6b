// The catalog's expression language (ops/catalog.yaml, `expr` of pointwise
// operators) as a tree. Grammar, loosest binding first:
//
//   expr    := ternary ('where' NAME '=' ternary)*   bindings, visible to
//                                                     the body and to the
//                                                     bindings before them
//   ternary := or ('?' ternary ':' ternary)?
//   or := and ('||' and)*        and := bor ('&&' bor)*
//   bor := bxor ('|' bxor)*      bxor := band ('^' band)*   (xor, as in C)
//   band := eq ('&' eq)*         eq := rel (('=='|'!=') rel)*
//   rel := add (('<'|'<='|'>'|'>=') add)* | add 'is' 'None'
//   add := mul (('+'|'-') mul)*  mul := unary (('*'|'/'|'%') unary)*
//   unary := ('-'|'!'|'~'|'+') unary | primary
//   primary := NUMBER | NAME | NAME '(' args ')' | '(' expr ')'
//
// Names resolve later (inputs, scalars, constants pi/inf/nan); bindings are
// substituted by the parser, so the tree never contains them.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace flagos::kernels {

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind { Number, Name, Unary, Binary, Ternary, Call, IsNone };
  Kind kind;
  std::string text;           // number literal, name, operator or function
  bool is_integer = false;    // Number: no '.', no exponent
  std::vector<ExprPtr> args;  // operands / call arguments
};

// Parses @p source. On error returns nullptr and sets *error to a message
// naming the position ("at 12: expected ')' but found 'x'").
ExprPtr parseExpr(const std::string& source, std::string* error);

// Every Name in @p e (for checking them against inputs and scalars).
void collectNames(const Expr& e, std::vector<std::string>* names);

// Round-trippable text of @p e, fully parenthesized (tests, diagnostics).
std::string toString(const Expr& e);

}  // namespace flagos::kernels
