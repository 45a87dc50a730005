import {
  choiceOption,
  intOption,
  listOption,
  parseCommandLine,
  readCommandLine,
  stringOption,
  UsageError,
} from "./args.ts";

const spec = {
  command: "demo-cmd",
  options: {
    iface: { type: "string" },
    vip: { type: "string", multiple: true },
    port: { type: "string" },
    verbose: { type: "boolean" },
  },
} as const;

function throwsUsage(fn: () => unknown, includes: string) {
  try {
    fn();
  } catch (e) {
    if (e instanceof UsageError && e.message.includes(includes)) return;
    throw new Error(`wrong error: ${(e as Error).message}`);
  }
  throw new Error("did not throw");
}

Deno.test("command lines parse strictly and typed readers name the bad argument", () => {
  const { values } = parseCommandLine(
    ["--iface=eth0", "--vip", "10.0.0.1,10.0.0.2", "--vip", "10.0.0.3", "--verbose"],
    spec,
  );
  if (stringOption(values, "iface") !== "eth0") throw new Error("iface");
  if (listOption(values, "vip").join() !== "10.0.0.1,10.0.0.2,10.0.0.3") throw new Error("vip");
  if (values.verbose !== true) throw new Error("verbose");
  throwsUsage(() => parseCommandLine(["--ifac", "x"], spec), "--ifac");
  throwsUsage(() => parseCommandLine(["stray"], spec), "stray");
  const { values: v2 } = parseCommandLine(["--port", "70000"], spec);
  throwsUsage(() => intOption(v2, "port", { default: 1, max: 65535 }), '--port "70000"');
  throwsUsage(() => stringOption(v2, "iface", { required: true }), "--iface");
});

/** Runs `fn` with console.log/error captured. */
function captured<T>(fn: () => T): { result: T; out: string[]; err: string[] } {
  const out: string[] = [], err: string[] = [];
  const { log, error } = console;
  console.log = (s: unknown) => void out.push(String(s));
  console.error = (s: unknown) => void err.push(String(s));
  try {
    return { result: fn(), out, err };
  } finally {
    console.log = log;
    console.error = error;
  }
}

Deno.test("readCommandLine: --help prints the usage (exit 0), a bad flag one line (exit 2)", () => {
  const withUsage = { ...spec, usage: "usage: demo-cmd --iface IF" };
  const read = ({ values }: { values: Record<string, unknown> }) => ({
    iface: stringOption(values as never, "iface", { required: true }),
  });
  for (const args of [["--help"], ["-h"], ["--iface", "x", "--help"]]) {
    const help = captured(() => readCommandLine(args, withUsage, read));
    if (JSON.stringify(help.result) !== '{"exit":0}' || help.out.join() !== withUsage.usage) {
      throw new Error(`${args}: ${JSON.stringify(help)}`);
    }
  }
  const cases: [string[], string][] = [
    [["--ifac", "x"], 'Cannot parse demo-cmd arguments: Unknown option "--ifac"'],
    [[], 'Cannot parse demo-cmd arguments: Missing required option "--iface"'],
    [["--iface"], 'Cannot parse demo-cmd arguments: Option "--iface <value>" argument missing'],
    [["--port", "-1"], 'Cannot parse demo-cmd arguments: Option "--port" argument is ambiguous'],
  ];
  for (const [args, want] of cases) {
    const bad = captured(() => readCommandLine(args, withUsage, read));
    if (JSON.stringify(bad.result) !== '{"exit":2}' || bad.err.length !== 1) {
      throw new Error(`${args}: ${JSON.stringify(bad)}`);
    }
    if (!bad.err[0]!.startsWith(want)) throw new Error(`${args}: "${bad.err[0]}" lacks ${want}`);
  }
  const ok = captured(() => readCommandLine(["--iface", "eth0"], withUsage, read));
  if (JSON.stringify(ok.result) !== '{"options":{"iface":"eth0"}}') throw new Error("ok");
});

Deno.test("choiceOption: the first choice by default, others named in the error", () => {
  const opts = { command: "c", options: { mode: { type: "string" } } } as const;
  if (choiceOption(parseCommandLine([], opts).values, "mode", ["native", "generic"]) !== "native") {
    throw new Error("default");
  }
  throwsUsage(
    () => choiceOption(parseCommandLine(["--mode=x"], opts).values, "mode", ["native", "generic"]),
    'Cannot use --mode "x": expected native or generic',
  );
});
