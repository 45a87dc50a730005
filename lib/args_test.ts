import { intOption, listOption, parseCommandLine, stringOption, UsageError } from "./args.ts";

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
