/**
 * A subset of CEL for CRD validation rules (`x-kubernetes-validations`): literals, `self`,
 * field access and indexing, `! - * / % + - < <= > >= == != in && || ?:`, lists and maps,
 * `has()`, `size()`, `all`/`exists`/`exists_one`/`filter`/`map`, string `startsWith`/
 * `endsWith`/`contains`/`matches`/`lowerAscii`/`upperAscii`, `int`/`string`/`double`, and
 * Kubernetes' `isIP`/`isCIDR`. {@linkcode compileCel} throws on anything else (and on
 * `oldSelf` transition rules), so a CRD with a rule this server cannot check is refused, not
 * stored with the rule ignored.
 *
 * @example
 * ```ts
 * import { compileCel } from "./cel.ts";
 * const rule = compileCel("has(self.cidr) ? !has(self.start) : has(self.start) && has(self.stop)");
 * console.assert(rule({ start: "10.0.0.1", stop: "10.0.0.9" }) === true);
 * ```
 *
 * @module
 */

type Node =
  | { t: "lit"; v: unknown }
  | { t: "id"; name: string }
  | { t: "sel"; of: Node; field: string }
  | { t: "idx"; of: Node; at: Node }
  | { t: "call"; fn: string; target?: Node; args: Node[] }
  | { t: "un"; op: string; x: Node }
  | { t: "bin"; op: string; a: Node; b: Node }
  | { t: "cond"; c: Node; a: Node; b: Node }
  | { t: "list"; items: Node[] }
  | { t: "map"; entries: [Node, Node][] };

const TOKEN =
  /\s*(?:(\d+\.\d+(?:[eE][+-]?\d+)?)|(\d+)u?|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|([A-Za-z_]\w*)|(\|\||&&|==|!=|<=|>=|[-+*/%!<>?:.,()[\]{}]))/y;

function tokenize(src: string): string[] {
  const out: string[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < src.length) {
    if (/^\s*$/.test(src.slice(TOKEN.lastIndex))) break;
    const at = TOKEN.lastIndex;
    const m = TOKEN.exec(src);
    if (!m) throw new Error(`cannot read CEL at ${at}: "${src.slice(at, at + 10)}"`);
    out.push(m[0].trim());
  }
  return out;
}

const MACROS = new Set(["all", "exists", "exists_one", "filter", "map"]);
const METHODS = new Set([
  "size",
  "startsWith",
  "endsWith",
  "contains",
  "matches",
  "lowerAscii",
  "upperAscii",
]);
const FUNCTIONS = new Set(["has", "size", "int", "string", "double", "isIP", "isCIDR"]);
const PRECEDENCE: Record<string, number> = {
  "||": 1,
  "&&": 2,
  "==": 3,
  "!=": 3,
  "<": 3,
  "<=": 3,
  ">": 3,
  ">=": 3,
  in: 3,
  "+": 4,
  "-": 4,
  "*": 5,
  "/": 5,
  "%": 5,
};

class Parser {
  i = 0;
  constructor(readonly toks: string[], readonly src: string) {}
  peek(): string | undefined {
    return this.toks[this.i];
  }
  next(): string {
    const t = this.toks[this.i++];
    if (t === undefined) throw new Error(`unexpected end of CEL expression "${this.src}"`);
    return t;
  }
  expect(t: string): void {
    const got = this.next();
    if (got !== t) throw new Error(`expected "${t}" but found "${got}" in "${this.src}"`);
  }
  expr(): Node {
    const c = this.binary(1);
    if (this.peek() !== "?") return c;
    this.next();
    const a = this.expr();
    this.expect(":");
    return { t: "cond", c, a, b: this.expr() };
  }
  binary(min: number): Node {
    let a = this.unary();
    for (let op = this.peek(); op !== undefined && (PRECEDENCE[op] ?? 0) >= min; op = this.peek()) {
      this.next();
      a = { t: "bin", op, a, b: this.binary(PRECEDENCE[op]! + 1) };
    }
    return a;
  }
  unary(): Node {
    const t = this.peek();
    if (t === "!" || t === "-") {
      this.next();
      return { t: "un", op: t, x: this.unary() };
    }
    return this.postfix(this.primary());
  }
  args(): Node[] {
    const out: Node[] = [];
    while (this.peek() !== ")") {
      out.push(this.expr());
      if (this.peek() === ",") this.next();
    }
    this.expect(")");
    return out;
  }
  postfix(x: Node): Node {
    for (;;) {
      if (this.peek() === ".") {
        this.next();
        const name = this.next();
        if (this.peek() === "(") {
          this.next();
          if (!MACROS.has(name) && !METHODS.has(name)) {
            throw new Error(`unsupported CEL method "${name}"`);
          }
          x = { t: "call", fn: name, target: x, args: this.args() };
        } else x = { t: "sel", of: x, field: name };
      } else if (this.peek() === "[") {
        this.next();
        const at = this.expr();
        this.expect("]");
        x = { t: "idx", of: x, at };
      } else return x;
    }
  }
  primary(): Node {
    const t = this.next();
    if (t === "(") {
      const e = this.expr();
      this.expect(")");
      return e;
    }
    if (t === "[") {
      const items: Node[] = [];
      while (this.peek() !== "]") {
        items.push(this.expr());
        if (this.peek() === ",") this.next();
      }
      this.next();
      return { t: "list", items };
    }
    if (t === "{") {
      const entries: [Node, Node][] = [];
      while (this.peek() !== "}") {
        const k = this.expr();
        this.expect(":");
        entries.push([k, this.expr()]);
        if (this.peek() === ",") this.next();
      }
      this.next();
      return { t: "map", entries };
    }
    if (/^\d/.test(t)) return { t: "lit", v: Number(t.replace(/u$/, "")) };
    if (/^["']/.test(t)) {
      return {
        t: "lit",
        v: JSON.parse(`"${t.slice(1, -1).replace(/\\'/g, "'").replace(/"/g, '\\"')}"`),
      };
    }
    if (t === "true" || t === "false") return { t: "lit", v: t === "true" };
    if (t === "null") return { t: "lit", v: null };
    if (/^[A-Za-z_]/.test(t)) {
      if (this.peek() === "(") {
        this.next();
        if (!FUNCTIONS.has(t)) throw new Error(`unsupported CEL function "${t}"`);
        return { t: "call", fn: t, args: this.args() };
      }
      if (t === "oldSelf") throw new Error("transition rules (oldSelf) are not supported");
      return { t: "id", name: t };
    }
    throw new Error(`unexpected "${t}" in CEL expression "${this.src}"`);
  }
}

/** A CEL evaluation error (a rule that cannot be evaluated fails validation). */
export class CelError extends Error {}

type Env = Record<string, unknown>;

function isMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function eq(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

const IPV4 = /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

function evaluate(n: Node, env: Env): unknown {
  switch (n.t) {
    case "lit":
      return n.v;
    case "id":
      if (!(n.name in env)) throw new CelError(`undeclared reference to "${n.name}"`);
      return env[n.name];
    case "sel": {
      const of = evaluate(n.of, env);
      if (!isMap(of) || !(n.field in of)) throw new CelError(`no such key: ${n.field}`);
      return of[n.field];
    }
    case "idx": {
      const of = evaluate(n.of, env);
      const at = evaluate(n.at, env);
      const v = Array.isArray(of) ? of[Number(at)] : isMap(of) ? of[String(at)] : undefined;
      if (v === undefined) throw new CelError(`no such key or index: ${JSON.stringify(at)}`);
      return v;
    }
    case "un": {
      const x = evaluate(n.x, env);
      return n.op === "!" ? !truth(x) : -(x as number);
    }
    case "cond":
      return truth(evaluate(n.c, env)) ? evaluate(n.a, env) : evaluate(n.b, env);
    case "list":
      return n.items.map((i) => evaluate(i, env));
    case "map":
      return Object.fromEntries(
        n.entries.map(([k, v]) => [String(evaluate(k, env)), evaluate(v, env)]),
      );
    case "bin":
      return binary(n, env);
    case "call":
      return call(n, env);
  }
}

function truth(v: unknown): boolean {
  if (typeof v !== "boolean") {
    throw new CelError(`no matching overload: expected bool, got ${JSON.stringify(v)}`);
  }
  return v;
}

function binary(n: Extract<Node, { t: "bin" }>, env: Env): unknown {
  if (n.op === "&&") return truth(evaluate(n.a, env)) && truth(evaluate(n.b, env));
  if (n.op === "||") return truth(evaluate(n.a, env)) || truth(evaluate(n.b, env));
  const a = evaluate(n.a, env) as never;
  const b = evaluate(n.b, env) as never;
  switch (n.op) {
    case "==":
      return eq(a, b);
    case "!=":
      return !eq(a, b);
    case "<":
      return a < b;
    case "<=":
      return a <= b;
    case ">":
      return a > b;
    case ">=":
      return a >= b;
    case "in":
      return Array.isArray(b) ? (b as unknown[]).some((e) => eq(e, a)) : isMap(b) && String(a) in b;
    case "+":
      return Array.isArray(a)
        ? [...(a as unknown[]), ...(b as unknown[])]
        : (a as number) + (b as number);
    case "-":
      return (a as number) - (b as number);
    case "*":
      return (a as number) * (b as number);
    case "/":
      return Number.isInteger(a) && Number.isInteger(b) ? Math.trunc(a / b) : a / b;
    case "%":
      return (a as number) % (b as number);
  }
  throw new CelError(`unsupported operator "${n.op}"`);
}

function call(n: Extract<Node, { t: "call" }>, env: Env): unknown {
  if (n.fn === "has") {
    const sel = n.args[0];
    if (sel?.t !== "sel") throw new CelError("has() needs a field selection");
    const of = evaluate(sel.of, env);
    return isMap(of) && sel.field in of;
  }
  if (n.target && MACROS.has(n.fn)) {
    const coll = evaluate(n.target, env);
    const items = Array.isArray(coll) ? coll : isMap(coll) ? Object.keys(coll) : [];
    const v = n.args[0];
    if (v?.t !== "id" || !n.args[1]) {
      throw new CelError(`${n.fn}() needs a variable and an expression`);
    }
    const each = (x: unknown) => evaluate(n.args[1]!, { ...env, [v.name]: x });
    if (n.fn === "all") return items.every((x) => truth(each(x)));
    if (n.fn === "exists") return items.some((x) => truth(each(x)));
    if (n.fn === "exists_one") return items.filter((x) => truth(each(x))).length === 1;
    if (n.fn === "filter") return items.filter((x) => truth(each(x)));
    return items.map(each);
  }
  const args = [...(n.target ? [n.target] : []), ...n.args].map((a) => evaluate(a, env));
  const [x, y] = args as [never, never];
  switch (n.fn) {
    case "size":
      return typeof x === "string"
        ? [...x].length
        : Array.isArray(x)
        ? (x as unknown[]).length
        : Object.keys(x).length;
    case "startsWith":
      return (x as string).startsWith(y);
    case "endsWith":
      return (x as string).endsWith(y);
    case "contains":
      return (x as string).includes(y);
    case "matches":
      return new RegExp(y, "u").test(x);
    case "lowerAscii":
      return (x as string).toLowerCase();
    case "upperAscii":
      return (x as string).toUpperCase();
    case "int":
      return Math.trunc(Number(x));
    case "double":
      return Number(x);
    case "string":
      return String(x);
    case "isIP":
      return typeof x === "string" && IPV4.test(x);
    case "isCIDR": {
      const [ip, len] = String(x).split("/");
      return IPV4.test(ip ?? "") && /^\d+$/.test(len ?? "") && Number(len) <= 32;
    }
  }
  throw new CelError(`unsupported function "${n.fn}"`);
}

/** A compiled rule: evaluates with `self` bound; throws {@linkcode CelError} when it cannot. */
export type CelProgram = (self: unknown) => unknown;

/** Compiles a CEL expression of the supported subset; throws (naming the construct) otherwise. */
export function compileCel(src: string): CelProgram {
  const p = new Parser(tokenize(src), src);
  const ast = p.expr();
  if (p.peek() !== undefined) {
    throw new Error(`unexpected "${p.peek()}" in CEL expression "${src}"`);
  }
  return (self) => evaluate(ast, { self });
}
