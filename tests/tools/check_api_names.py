#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that the names docs/api.md documents exist in include/.

Usage: check_api_names.py [REPOSITORY_ROOT] [DOCUMENT]

Prints one line per name the document uses that the headers lack, with its line number, and
exits 1 if there is any. What counts as a documented name:

- every `flashmma::name` (and `flashmma::sm90::name`, ...), in code spans and in cpp code blocks;
- a code span that is a name expression as a whole: `name`, `scope::name`, `Name<...>`,
  `Name<...>::member`, `name(arguments)`; its leading name (each part of a scope) and a member
  after its template arguments. Template arguments are not checked: they are placeholders
  (`Config`, `P`);
- a call written in a code span, `name(a, b)` or `name<...>(a[, b])`: some declaration of `name`
  in include/ must take that many arguments (a parameter with a default may be left out);
- a declaration written out, in a cpp code block (`Status forward(const ForwardParams& params,
  cudaStream_t stream = nullptr);`) or in a code span (`bool visible(ScoreCoord, SequenceLengths)
  const`): some declaration of that name in include/ must have the same parameter types, with
  `const T&` read as `T` and parameter names and default values left out. Return types are not
  compared;
- `Struct::member` and `params.field` (or `p.field`): the member must be declared in the body of
  that struct or of a base it derives from (`params` is ForwardParams or BackwardParams); so must
  the first column's names of a table headed "Field" under a heading that is a struct's name
  (the table of `## ForwardParams`);
- a struct or enum written out in a cpp code block (`struct DeviceInfo { ... };`): its data members
  (or enumerators) must be exactly those of the real one, neither more nor fewer; a member
  function written there must exist in it. A `template <...> struct Name;` must have the real
  template parameter list;
- a file named in a code span (`traits/element.hpp`, `examples/document_mask.cu`): it must exist
  under include/flashmma/, docs/ or the repository root.

A name "exists" when it is an identifier of the headers' code: comments and string literals are
left out, so a name that survives only in a comment or an error message does not count. Names
that are not flashmma's (CUDA's, PTX's, CMake's, FlashAttention's) are listed in EXTERNAL_NAMES.
Not checked: error-message texts as a whole, return types, template arguments, the text of sh
and cmake code blocks.
"""

import glob
import os
import re
import sys

# Names api.md uses that belong to something other than flashmma's headers.
EXTERNAL_NAMES = {
    # CUDA runtime and driver, compiler
    "cudaFuncGetAttributes", "cudaFuncSetAttribute", "cudaDeviceGetAttribute", "cudaGetDevice",
    "cudaGridDependencySynchronize", "cudaMalloc", "binaryVersion", "ptxVersion", "nvcc",
    "MaxDynamicSharedMemorySize", "cudaErrorNoKernelImageForDevice", "cudaErrorName",
    # PTX mnemonics and math
    "ldmatrix", "setmaxnreg", "wgmma", "tanh", "sqrt", "exp", "log", "abs", "ceil",
    # CMake
    "CMAKE_CUDA_ARCHITECTURES", "CUDA_ARCHITECTURES", "find_package", "find_dependency",
    "CUDAToolkit", "flashmma_KERNELS_CUDA_ARCHITECTURES", "native", "OFF",
    # FlashAttention's and PyTorch's names, cited for comparison
    "flash_attn_func", "window_size", "cache_batch_idx", "expand",
    # programs of this repository, not of include/
    "flashmma_bench",
    # architecture names and notation
    "sm_90", "sm_90a", "S_j",
}

KEYWORDS = {
    "alignas", "alignof", "auto", "bool", "char", "class", "const", "constexpr", "decltype",
    "double", "enum", "explicit", "extern", "false", "float", "inline", "int", "long", "noexcept",
    "nullptr", "operator", "private", "public", "return", "short", "signed", "sizeof", "static",
    "static_assert", "struct", "template", "true", "typename", "unsigned", "using", "void",
    "volatile", "if", "for", "while", "switch", "case", "else", "new", "delete", "do",
}

SOURCE_EXTENSIONS = (".hpp", ".cuh", ".cu", ".h", ".cpp", ".md", ".sh", ".py", ".txt", ".cmake")
IDENTIFIER = r"[A-Za-z_]\w*"


def strip_comments_and_strings(text):
    """Blanks comments and string/char literals, keeping line breaks and offsets."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching(text, start, open_char, close_char):
    """Index just past the bracket that closes the one at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_char:
            depth += 1
        elif text[i] == close_char:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def split_top_level(text, separator=","):
    parts, depth, current = [], 0, []
    for c in text:
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        if c == separator and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def parameter_type(parameter):
    """`const ForwardParams& params = x` -> `ForwardParams`; `int64_t` -> `int64_t`."""
    parameter = split_top_level(parameter, "=")[0] if "=" in parameter else parameter
    parameter = re.sub(r"\s+", " ", parameter).strip()
    parameter = re.sub(r"\s*([*&])\s*", r"\1 ", parameter).strip()
    match = re.fullmatch(r"(.*[\w>*&\]])\s+(" + IDENTIFIER + r")", parameter)
    if match and match.group(1) not in ("const", "unsigned", "signed", "struct", "class"):
        parameter = match.group(1)
    parameter = re.sub(r"\s+", "", parameter)
    parameter = re.sub(r"^const(.*)&$", r"\1", parameter)
    return parameter


def parameter_types(parameter_list):
    parameters = split_top_level(parameter_list)
    if parameters == ["void"]:
        return []
    return [parameter_type(p) for p in parameters]


class Headers:
    """What include/ declares: its identifiers, function parameter lists, struct bodies."""

    def __init__(self, include_dir):
        self.identifiers = set()
        self.functions = {}  # name -> list of (types, required count)
        self.structs = {}  # name -> list of (bases, body)
        self.enums = {}  # name -> list of enumerators
        self.templates = {}  # struct name -> list of template parameter lists
        for path in sorted(glob.glob(os.path.join(include_dir, "**", "*"), recursive=True)):
            if os.path.isfile(path) and path.endswith((".hpp", ".cuh", ".h")):
                with open(path, encoding="utf-8") as f:
                    self.read(strip_comments_and_strings(f.read()))

    def read(self, code):
        self.identifiers.update(re.findall(IDENTIFIER, code))
        for match in re.finditer(r"(" + IDENTIFIER + r"|[>&*])\s+(" + IDENTIFIER + r")\s*\(", code):
            before, name = match.group(1), match.group(2)
            if before in ("return", "new", "else", "case", "throw") or name in KEYWORDS:
                continue
            open_paren = match.end() - 1
            parameter_list = code[open_paren + 1:matching(code, open_paren, "(", ")") - 1]
            parameters = split_top_level(parameter_list)
            required = sum(1 for p in parameters if "=" not in p.replace("==", ""))
            self.functions.setdefault(name, []).append((parameter_types(parameter_list),
                                                        required))
        for match in re.finditer(r"\b(?:struct|class)\s+(" + IDENTIFIER + r")\s*(?:final\s*)?"
                                 r"(?::\s*([^{;]*))?\{", code):
            end = matching(code, match.end() - 1, "{", "}")
            bases = re.findall(IDENTIFIER, re.sub(r"<[^<>]*>", "", match.group(2) or ""))
            self.structs.setdefault(match.group(1), []).append((bases, code[match.end():end - 1]))
        for match in re.finditer(r"\benum\s+class\s+(" + IDENTIFIER + r")[^{;]*\{([^}]*)\}",
                                 code):
            self.enums[match.group(1)] = [split_top_level(e, "=")[0].strip()
                                          for e in split_top_level(match.group(2))]
        for match in re.finditer(r"\btemplate\s*<", code):
            end = matching(code, match.end() - 1, "<", ">")
            following = re.match(r"\s*(?:struct|class)\s+(" + IDENTIFIER + r")\s*[{:;]",
                                 code[end:])
            if following:
                self.templates.setdefault(following.group(1), []).append(
                    normalize_template(code[match.end():end - 1]))

    def members(self, struct, seen=None):
        """Identifiers declared in the body of `struct` and of its bases."""
        seen = seen or set()
        if struct in seen:
            return set()
        seen.add(struct)
        names = set()
        for bases, body in self.structs.get(struct, []):
            names.update(re.findall(IDENTIFIER, body))
            for base in bases:
                names |= self.members(base, seen)
        return names

    def data_members(self, struct):
        """Names of the non-static data members declared at the top level of `struct`'s body."""
        names = set()
        for bases, body in self.structs.get(struct, []):
            names |= data_members_of(body)
        return names


def top_level_statements(body):
    statements, depth, current = [], 0, []
    for c in body:
        if c in "{(":
            depth += 1
        elif c in "})":
            depth -= 1
        current.append(c)
        if depth == 0 and c in ";}":
            statements.append("".join(current).strip())
            current = []
    return statements


def data_members_of(body):
    names = set()
    for statement in top_level_statements(body):
        statement = re.sub(r"^(public|private|protected)\s*:", "", statement).strip()
        if (not statement.endswith(";") or "(" in statement.split("=")[0] or
                re.match(r"(static|using|typedef|friend|template|enum|struct|class)\b", statement)):
            continue
        declaration = split_top_level(statement.rstrip(";"), "=")[0]
        declaration = re.sub(r"\{.*\}$", "", declaration).strip()
        match = re.search(r"(" + IDENTIFIER + r")\s*(\[[^\]]*\])?$", declaration)
        if match:
            names.add(match.group(1))
    return names


def normalize_template(parameters):
    return [re.sub(r"\s+", " ", p).strip() for p in split_top_level(parameters)]


def cmake_names(root):
    """Targets (`flashmma::kernels`) and FLASHMMA_ options of flashmma's CMake files."""
    names = set()
    paths = [os.path.join(root, "CMakeLists.txt")] + glob.glob(os.path.join(root, "cmake", "*"))
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        names.update(re.findall(r"\b\w+::\w+\b", text))
        names.update(re.findall(r"\bFLASHMMA_[A-Z0-9_]+\b", text))
    return names


PARAMS_STRUCTS = ("ForwardParams", "BackwardParams")
NAME_EXPRESSION = re.compile(
    r"(?P<scopes>(?:" + IDENTIFIER + r"::)*)(?P<name>" + IDENTIFIER + r")"
    r"(?P<template><.*>)?(?P<member>(?:::" + IDENTIFIER + r")*)"
    r"(?P<call>\(.*\))?(?:\s*const)?")
DECLARATION = re.compile(
    r"(?:template\s*<.*>\s*)?(?:\[\[nodiscard\]\]\s*)?(?:(?:static|inline|constexpr|explicit)\s+)*"
    r"[\w:<>,*& ]*?[\w>*&]\s+(?P<name>" + IDENTIFIER + r")\s*\((?P<parameters>.*)\)"
    r"\s*(?:const)?\s*;?(?:\s*//.*)?")


class Checker:
    def __init__(self, root, document):
        self.root = root
        self.document = document
        self.headers = Headers(os.path.join(root, "include"))
        self.cmake_names = cmake_names(root)
        self.problems = []
        self.checked = {"names": set(), "calls": 0, "declarations": 0, "definitions": 0,
                        "files": 0}

    def report(self, line, message):
        self.problems.append((line, message))

    def exists(self, name):
        return name in self.headers.identifiers or name in EXTERNAL_NAMES

    def check_name(self, line, name, what="name"):
        self.checked["names"].add(name)
        if name in KEYWORDS or self.exists(name):
            return
        self.report(line, f"{what} `{name}` is not in include/")

    def check_member(self, line, struct, member):
        if struct not in self.headers.structs:
            self.check_name(line, member)
            return
        if member not in self.headers.members(struct):
            self.report(line, f"`{struct}::{member}`: {struct} (with its bases) has no `{member}`")

    def check_field(self, line, field):
        if not any(field in self.headers.members(s) for s in PARAMS_STRUCTS):
            self.report(line, f"`params.{field}`: neither ForwardParams nor BackwardParams has "
                              f"`{field}`")

    def check_arity(self, line, name, arguments):
        self.checked["calls"] += 1
        if arguments.strip() == "...":  # arguments elided: nothing to count
            return
        optional = re.findall(r"\[,?([^\]]*)\]", arguments)
        fixed = len(split_top_level(re.sub(r"\[[^\]]*\]", "", arguments)))
        most = fixed + sum(len(split_top_level(o)) for o in optional)
        overloads = self.headers.functions.get(name)
        if overloads is None:
            return  # a name that is not a function (a type's constructor), or already reported
        if not any(required <= count <= len(types)
                   for types, required in overloads for count in range(fixed, most + 1)):
            counts = sorted({len(types) for types, _ in overloads})
            self.report(line, f"`{name}({arguments})`: {name} takes "
                              f"{' or '.join(map(str, counts))} arguments in include/")

    def check_declaration(self, line, name, parameter_list):
        self.checked["declarations"] += 1
        self.check_name(line, name)
        overloads = self.headers.functions.get(name)
        if not overloads or "..." in parameter_list:
            return
        types = parameter_types(parameter_list)
        if not any(types == real for real, _ in overloads):
            real = " | ".join(sorted({"(" + ", ".join(t) + ")" for t, _ in overloads}))
            self.report(line, f"`{name}({', '.join(types)})`: no declaration in include/ has "
                              f"these parameter types; include/ has {real}")

    def check_qualified(self, line, text):
        for match in re.finditer(r"\bflashmma::((?:" + IDENTIFIER + r"::)*" + IDENTIFIER + r")",
                                 text):
            for part in match.group(1).split("::"):
                self.check_name(line, part)
        for match in re.finditer(r"\b(?:params|p)\.(" + IDENTIFIER + r")\b(?!\.)", text):
            self.check_field(line, match.group(1))
        for match in re.finditer(r"\b([A-Z]\w*)::(" + IDENTIFIER + r")\b", text):
            struct, member = match.group(1), match.group(2)
            if struct in self.headers.enums:
                if member not in self.headers.enums[struct]:
                    self.report(line, f"`{struct}::{member}`: enum {struct} has no `{member}`")
            elif struct in self.headers.structs:
                self.check_member(line, struct, member)

    def check_path(self, line, path):
        self.checked["files"] += 1
        bases = [os.path.join(self.root, "include", "flashmma"), os.path.join(self.root, "docs"),
                 self.root]
        if not any(glob.glob(os.path.join(base, path)) for base in bases):
            self.report(line, f"file `{path}` does not exist")

    def check_span(self, line, span):
        span = span.strip()
        if re.fullmatch(r"[\w*-][\w./*-]*", span) and span.endswith(SOURCE_EXTENSIONS):
            self.check_path(line, span)
            return
        if span in self.cmake_names:
            return  # a CMake target, option or variable of flashmma's build
        self.check_qualified(line, span)
        if re.fullmatch(r"(?:static\s+)?constexpr\s+bool\s+(" + IDENTIFIER + ")", span):
            self.check_name(line, span.split()[-1])
            return
        declaration = DECLARATION.fullmatch(span)
        if declaration and not NAME_EXPRESSION.fullmatch(span):
            self.check_declaration(line, declaration.group("name"),
                                   declaration.group("parameters"))
            return
        expression = NAME_EXPRESSION.fullmatch(span)
        if not expression:
            return
        scopes = [s for s in expression.group("scopes").split("::") if s]
        if scopes and scopes[0] == "flashmma":
            scopes = scopes[1:]
        for part in scopes + [expression.group("name")]:
            self.check_name(line, part)
        for member in expression.group("member").split("::"):
            if member:
                self.check_name(line, member, "member")
        if expression.group("call") is not None:
            self.check_arity(line, expression.group("name"), expression.group("call")[1:-1])

    def check_code_block(self, first_line, lines):
        text = "\n".join(lines)
        for offset, code in enumerate(lines):
            self.check_qualified(first_line + offset, code)
        self.check_block_declarations(first_line, lines)

    def check_block_declarations(self, first_line, lines):
        """Declarations, struct and enum definitions written out in a cpp code block."""
        i = 0
        while i < len(lines):
            code = re.sub(r"//.*", "", lines[i]).strip()
            line = first_line + i
            # Join a declaration whose brackets close on a later line.
            j = i
            while (code.count("(") > code.count(")") or code.count("<") > code.count(">")) \
                    and j + 1 < len(lines):
                j += 1
                code += " " + re.sub(r"//.*", "", lines[j]).strip()
            # A template header on a line of its own belongs to the next line's declaration.
            if code.startswith("template") and code.endswith(">") and j + 1 < len(lines):
                j += 1
                code += " " + re.sub(r"//.*", "", lines[j]).strip()
            definition = re.match(r"(?:template\s*<(?P<template>.*)>\s*)?(?P<kind>struct|class|"
                                  r"enum class)\s+(?P<name>" + IDENTIFIER + r")\s*(?P<rest>.*)$",
                                  code)
            if definition and definition.group("rest").startswith("{"):
                body = [definition.group("rest")[1:]]
                k = j
                while "};" not in body[-1] and k + 1 < len(lines):
                    k += 1
                    body.append(re.sub(r"//.*", "", lines[k]))
                self.check_definition(line, definition.group("kind"), definition.group("name"),
                                      "\n".join(body).split("};")[0], first_line + j + 1)
                i = k + 1
                continue
            if definition and definition.group("rest") == ";" and definition.group("template"):
                self.check_template(line, definition.group("name"), definition.group("template"))
            elif not definition:
                declaration = DECLARATION.fullmatch(code)
                if declaration and not code.startswith(("using", "return", "if", "const ")):
                    self.check_declaration(line, declaration.group("name"),
                                           declaration.group("parameters"))
            i = j + 1

    def check_definition(self, line, kind, name, body, body_line):
        self.checked["definitions"] += 1
        self.check_name(line, name)
        if kind == "enum class":
            documented = [e.strip() for e in split_top_level(body) if e.strip()]
            real = self.headers.enums.get(name)
            if real is not None and documented != real:
                self.report(line, f"enum class {name}: documented {{{', '.join(documented)}}}, "
                                  f"include/ has {{{', '.join(real)}}}")
            return
        if name not in self.headers.structs:
            return
        members = self.headers.members(name)
        has_functions = False
        for offset, statement in enumerate(body.split("\n")):
            statement = re.sub(r"^\s*(public|private|protected)\s*:", "", statement).strip()
            if not statement:
                continue
            function = DECLARATION.fullmatch(statement)
            operator = "operator" in statement
            if function or operator:
                has_functions = True
                if function and function.group("name") not in members:
                    self.report(body_line + offset, f"`{name}::{function.group('name')}` is not "
                                                    f"declared in {name}")
                continue
            using = re.match(r"using\s+(" + IDENTIFIER + ")", statement)
            if using:
                if using.group(1) not in members:
                    self.report(body_line + offset, f"`{name}::{using.group(1)}` is not "
                                                    f"declared in {name}")
        if not has_functions:
            documented = data_members_of(body)
            real = self.headers.data_members(name)
            if documented and documented != real:
                if documented - real:
                    self.report(line, f"struct {name}: include/ has no member "
                                      f"{', '.join(sorted(documented - real))}")
                if real - documented:
                    self.report(line, f"struct {name}: the document leaves out "
                                      f"{', '.join(sorted(real - documented))}")

    def check_template(self, line, name, parameters):
        self.checked["definitions"] += 1
        self.check_name(line, name)
        real = self.headers.templates.get(name)
        documented = normalize_template(parameters)
        if real and documented not in real:
            self.report(line, f"template <{', '.join(documented)}> {name}: include/ declares "
                              f"template <{', '.join(real[0])}>")

    def run(self):
        with open(self.document, encoding="utf-8") as f:
            lines = f.read().split("\n")
        block, block_language, block_start = None, None, 0
        heading, table_struct = "", None
        for number, text in enumerate(lines, start=1):
            fence = re.match(r"\s*```(\w*)", text)
            if fence:
                if block is None:
                    block, block_language, block_start = [], fence.group(1), number + 1
                else:
                    if block_language == "cpp":
                        self.check_code_block(block_start, block)
                    block = None
                continue
            if block is not None:
                block.append(text)
                continue
            heading_match = re.match(r"#+\s+(\S+)", text)
            if heading_match:
                heading = heading_match.group(1)
            if re.match(r"\|\s*Field\s*\|", text):
                table_struct = heading if heading in self.headers.structs else None
            elif not text.startswith("|"):
                table_struct = None
            elif table_struct and not text.startswith("|---"):
                # A "Field" table under a struct's heading: its first column names members.
                for field in re.findall(r"`(" + IDENTIFIER + r")`", text.split("|")[1]):
                    self.check_member(number, table_struct, field)
            for span in re.findall(r"`([^`]+)`", text):
                self.check_span(number, span)
        relative = os.path.relpath(self.document, self.root)
        checked = self.checked
        print(f"{relative}: checked {len(checked['names'])} distinct names, {checked['calls']} "
              f"calls, {checked['declarations']} declarations, {checked['definitions']} struct, "
              f"enum and template definitions, {checked['files']} file names")
        for line, message in sorted(set(self.problems)):
            print(f"{relative}:{line}: {message}")
        if self.problems:
            print(f"{len(set(self.problems))} documented names do not match include/")
            return 1
        print(f"{relative}: every documented name is in include/")
        return 0


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    document = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "docs", "api.md")
    return Checker(os.path.abspath(root), os.path.abspath(document)).run()


if __name__ == "__main__":
    sys.exit(main())
