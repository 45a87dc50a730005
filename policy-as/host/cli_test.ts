import { captureLogs } from "../../lib/log.ts";
import { main } from "./cli.ts";

const BUILD = new URL("../build/", import.meta.url).pathname;

async function run(args: string[]): Promise<{ code: number; out: string[] }> {
  const out: string[] = [];
  const log = console.log;
  const err = console.error;
  console.log = (s: unknown) => void out.push(String(s));
  console.error = (s: unknown) => void out.push(String(s));
  try {
    return { code: await main(args), out };
  } finally {
    console.log = log;
    console.error = err;
  }
}

Deno.test("policy check: the release build passes, with a JSON report", async () => {
  const { code, out } = await run(["check", `${BUILD}release.wasm`]);
  if (code !== 0) throw new Error(out.join("\n"));
  const report = JSON.parse(out[0]!);
  if (!report.ok || report.flowHashVectors < 1) throw new Error(out[0]);
});

Deno.test("policy check: a module with a different hash exits 1 with the reason", async () => {
  const { code, out } = await run(["check", `${BUILD}fixtures/wrong_hash.wasm`]);
  if (code !== 1) throw new Error(`exit ${code}`);
  const report = JSON.parse(out[0]!);
  if (report.ok || report.reason !== "vectors") throw new Error(out[0]);
});

Deno.test("policy check: --budget-ms applies the time budget", async () => {
  const { code, out } = await run([
    "check",
    `${BUILD}fixtures/slow_build.wasm`,
    "--budget-ms",
    "5",
  ]);
  if (code !== 1 || JSON.parse(out[0]!).reason !== "time-budget") throw new Error(out.join("\n"));
});

Deno.test("policy: usage errors exit 2 with one line naming the problem", async () => {
  const cases: [string[], string][] = [
    [[], "Missing subcommand"],
    [["frobnicate"], '"frobnicate"'],
    [["check"], "Missing FILE"],
    [["check", "a", "b"], '"b"'],
    [["check", "a", "--budget-ms", "x"], '--budget-ms "x"'],
    [["check", "a", "--active", "/x"], '"--active"'],
    [["swap", "a", "--bogus"], '"--bogus"'],
  ];
  for (const [args, want] of cases) {
    const { code, out } = await run(args);
    if (code !== 2 || out.length !== 1 || !out[0]!.includes(want)) {
      throw new Error(`${args}: exit ${code}, ${JSON.stringify(out)} lacks ${want}`);
    }
  }
});

Deno.test("policy --help prints the usage of both subcommands and exits 0", async () => {
  for (const args of [["--help"], ["check", "--help"], ["swap", "-h"]]) {
    const { code, out } = await run(args);
    const text = out.join("\n");
    if (code !== 0 || !text.includes("policy check FILE") || !text.includes("policy swap FILE")) {
      throw new Error(`${args}: exit ${code}, ${text}`);
    }
  }
});

Deno.test("policy check: --budget-ms takes a fraction of a millisecond", async () => {
  const { code, out } = await run([
    "check",
    `${BUILD}fixtures/slow_build.wasm`,
    "--budget-ms=0.5",
  ]);
  if (code !== 1 || JSON.parse(out[0]!).reason !== "time-budget") throw new Error(out.join("\n"));
});

Deno.test("policy swap: a rejected module never touches the active path", async () => {
  using logs = captureLogs();
  const { code } = await run([
    "swap",
    `${BUILD}fixtures/trap_build.wasm`,
    "--active",
    "/nonexistent-holdfast-test/active.wasm",
  ]);
  if (code !== 1) throw new Error(`exit ${code}`);
  if (!logs.records.some((r) => r.msg === "policy module rejected" && r.reason === "trap")) {
    throw new Error(JSON.stringify(logs.records));
  }
});
