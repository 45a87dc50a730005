import { deepStrictEqual, strictEqual, throws } from "node:assert/strict";
import { parseCommandLine, UsageError } from "../../lib/args.ts";
import { NODE_COMMAND, readNodeArgs } from "./args.ts";
import { main } from "./main.ts";

const read = (args: string[]) =>
  readNodeArgs(parseCommandLine(args, NODE_COMMAND), { readFile: () => "secret\n" });

Deno.test("node args: pods and model sources, defaults", () => {
  const a = read([
    ...["--node-name", "n1", "--kube", "--model", "redis", "--redis", "redis://r:6379"],
    ...["--node-address", "10.12.1.2"],
  ]);
  deepStrictEqual(a.pods, { kube: true, kubeconfig: undefined });
  deepStrictEqual(a.model, { redis: { url: "redis://r:6379" } });
  deepStrictEqual(a.uplinks, []);
  deepStrictEqual(a.nodeAddresses, ["10.12.1.2"]);
  strictEqual(a.encapPort, undefined, "the model's unless given");
  strictEqual(a.mssMax, 1432);
  strictEqual(a.flowIdleS, 7200);
  deepStrictEqual(a.listen, { hostname: "127.0.0.1", port: 9472 });
  const b = read([
    ...["--node-name", "n1", "--pods", "p.yaml", "--config", "s.yaml", "--uplink", "eth0,eth1"],
    ...["--encap-port", "7000", "--listen", "none", "--redis-password-file", "f"],
  ]);
  deepStrictEqual(b.pods, { file: "p.yaml" });
  deepStrictEqual(b.model, { file: "s.yaml" });
  deepStrictEqual(b.uplinks, ["eth0", "eth1"]);
  strictEqual(b.encapPort, 7000);
  strictEqual(b.listen, null);
  const c = read(["--node-name", "n", "--kube", "--model", "redis", "--redis", "redis://r"].concat(
    ["--redis-password-file", "f", "--uplink", "eth0"],
  ));
  strictEqual("redis" in c.model && c.model.redis.password, "secret");
  // A Redis Cluster, as every Redis user takes (docs/operators.md).
  const d = read(["--node-name", "n", "--kube", "--model", "redis", "--uplink", "eth0"].concat(
    ["--redis", "redis+cluster://r1:6379,r2:6379"],
  ));
  deepStrictEqual(d.model, { redis: { url: "redis+cluster://r1:6379,r2:6379" } });
});

Deno.test("node args: usage errors name the problem", () => {
  const bad: [string[], RegExp][] = [
    [["--node-name", "n", "--config", "s"], /--kube.*--pods/],
    [["--node-name", "n", "--kube", "--pods", "p", "--config", "s"], /exactly one/],
    [["--node-name", "n", "--kube"], /--model redis.*--config/],
    [["--node-name", "n", "--kube", "--model", "etcd"], /only model source/],
    [["--kube", "--config", "s", "--uplink", "eth0"], /--node-name/],
    [["--node-name", "n", "--kube", "--config", "s"], /--uplink IF.*--node-address IP/],
    [
      [
        "--node-name",
        "n",
        "--kube",
        "--config",
        "s",
        "--uplink",
        "e",
        "--node-address",
        "10.0.0.1",
      ],
      /exactly one/,
    ],
    [
      ["--node-name", "n", "--kube", "--config", "s", "--node-address", "eth0"],
      /not an IP address/,
    ],
    [["--node-name", "n", "--pods", "p", "--kubeconfig", "k", "--config", "s"], /--kubeconfig/],
    [["--node-name", "n", "--kube", "--model", "redis", "--redis", "http://x"], /redis:\/\//],
    [["--node-name", "n", "--kube", "--model", "redis", "--redis", "redis+cluster://"], /--redis/],
    [["--node-name", "n", "--kube", "--config", "s", "--listen", "x"], /--listen/],
    [
      ["--node-name", "n", "--kube", "--config", "s", "--uplink", "e", "--encap-port", "0"],
      /encap-port/,
    ],
  ];
  for (const [args, why] of bad) {
    throws(() => read(args), (e) => e instanceof UsageError && why.test(e.message), args.join(" "));
  }
});

Deno.test("main.ts node: --help exits 0, a bad flag exits 2", async () => {
  strictEqual(await main(["--help"]), 0);
  strictEqual(await main(["--bogus"]), 2);
});

Deno.test("node args: --egress-steer takes the model's Redis or its own --redis", () => {
  const base = ["--node-name", "n1", "--pods", "p.yaml", "--uplink", "eth0"];
  strictEqual(read([...base, "--config", "s.yaml"]).egressSteer, undefined, "off by default");
  const own = read([...base, "--config", "s.yaml", "--egress-steer", "--redis", "redis://r:1"]);
  deepStrictEqual(own.egressSteer, { redis: { url: "redis://r:1" }, cleanup: false });
  const model = read([
    ...base,
    ...["--model", "redis", "--redis", "redis://m:2", "--egress-steer", "--egress-steer-cleanup"],
  ]);
  deepStrictEqual(model.egressSteer, { redis: { url: "redis://m:2" }, cleanup: true });
  throws(() => read([...base, "--config", "s.yaml", "--egress-steer"]), /redis/);
  throws(
    () => read([...base, "--config", "s.yaml", "--egress-steer-cleanup"]),
    /--egress-steer-cleanup goes with --egress-steer/,
  );
});
