/**
 * `main.ts node` end to end in network namespaces (issue 22, docs/backends.md): pods get the LB's
 * traffic with nothing set inside them — no `main.ts decap`, no LB IP on their `lo`. The lab is
 * lab/node_pods.ts: a client, a router, an LB node running `main.ts agent`, and a node with two
 * pods behind veths (/32 and /128 host routes, an nft rule dropping what a pod sends from another
 * address than its own), Services port 80 → targetPort 8080 in both families.
 *
 * The node agent follows the model in Redis (published by a test controller from the same
 * services as the LB agent's file) and a pods file; it runs in this process with `--netns` (its
 * programs go on node1's uplink) and is stopped and started like a DaemonSet rollout. Replies go
 * straight from node1 to the client (DSR) with the LB IP and port as source.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest, until } from "../harness/mod.ts";
import {
  LAB_PODS as PODS,
  PEER,
  POD_VIP as VIP,
  POD_VIP6 as VIP6,
  podServices as services,
  podsFile,
  startNodePodsLab,
} from "../../lab/node_pods.ts";
import { startRedis } from "../../lab/redis_server.ts";
import {
  attachTc,
  BpfMap,
  NODE_REASONS,
  NODE_TC_FILTER,
  NodeDatapath,
  u32,
} from "../../node/bpf/mod.ts";
import { decodeNodeFlow, decodeNodeSvc } from "../../node/bpf/node_structs.ts";
import { connectModelStore } from "../../controller/model/mod.ts";
import { startTestController } from "../../controller/model/_testing.ts";
import { captureLogs } from "../../lib/log.ts";

function lastJson<T>(stdout: string): T {
  const line = stdout.trim().split("\n").filter((l) => l.startsWith("{")).pop();
  if (line === undefined) throw new Error(`no JSON line in output: ${JSON.stringify(stdout)}`);
  return JSON.parse(line) as T;
}

rootTest(
  "node agent: pods behind veths get the LB's traffic, DSR, restart, pod removal",
  async (t) => {
    const nodePin = `/sys/fs/bpf/hf-${Deno.pid}-node1`;
    await using lab = await startNodePodsLab();
    const { topo } = lab;
    await using redis = await startRedis();
    const store = connectModelStore({ url: redis.url });
    using logs = captureLogs();
    const { main: nodeMain } = await import("../../node/backends/main.ts");
    const nodeAgent = () => {
      const stop = new AbortController();
      const exit = nodeMain([
        ...["--node-name", "node1", "--model", "redis", "--redis", redis.url],
        ...["--pods", lab.podsPath, "--netns", topo.ns("node1"), "--node-address", "10.12.1.2"],
        ...["--pin-dir", nodePin, "--listen", "none"],
      ], { signal: stop.signal });
      return { stop: async () => (stop.abort(), await exit), exit };
    };
    const applied = () => logs.records.filter((r) => r.msg === "node state applied").length;
    const pinned = (name: string) => BpfMap.fromPinned(`${nodePin}/${name}`);
    const nodeStats = () => {
      using m = pinned("hf_node_stat");
      const out: Record<string, bigint> = {};
      NODE_REASONS.forEach((n, i) => {
        const v = m.lookup(u32(i));
        let sum = 0n;
        for (let o = 0; v !== null && o < v.length; o += 8) {
          sum += new DataView(v.buffer, v.byteOffset).getBigUint64(o, true);
        }
        out[n] = sum;
      });
      return out;
    };
    let agent: ReturnType<typeof nodeAgent> | null = null;
    try {
      await using _ctl = await startTestController(store, services(PODS));
      agent = nodeAgent();
      await until("the node agent applied model and pods", () => applied() >= 1, 20_000);

      await t.step("each pod's frontend logged and in the maps, port 80 → target port 8080", () => {
        const lines = logs.records.map((r) => r.msg);
        for (const p of PODS) {
          for (
            const want of [
              `pod ${p.name} ${p.ip} serves ${VIP}:80/TCP → :8080`,
              `pod ${p.name} ${p.ip6} serves [${VIP6}]:80/TCP → :8080`,
            ]
          ) strictEqual(lines.includes(want), true, `log line "${want}"`);
        }
        using svc = pinned("hf_node_svc");
        using svc6 = pinned("hf_node_svc6");
        deepStrictEqual(
          [...svc.entries(), ...svc6.entries()].map(([k, v]) => decodeNodeSvc(k, v))
            .map((f) => `${f.pod} ${f.targetPort}`).sort(),
          PODS.flatMap((p) => [`${p.ip} 8080`, `${p.ip6} 8080`]).sort(),
        );
      });

      await t.step(
        "client connections reach both pods with the client's address, via DSR",
        async () => {
          for (const vip of [VIP, VIP6]) {
            const out = await lab.peer(["client", vip, "80", "100", "10"]);
            const s = lastJson<
              {
                ok: number;
                failed: number;
                wrongPeer: number;
                spread: Record<string, number>;
                errors: string[];
              }
            >(out.stdout);
            strictEqual(s.failed, 0, `${vip}: failed connections: ${JSON.stringify(s.errors)}`);
            strictEqual(s.wrongPeer, 0, `${vip}: each pod saw the client's own address and port`);
            strictEqual(s.ok, 100, vip);
            for (const p of PODS) {
              strictEqual((s.spread[p.name] ?? 0) > 0, true, `${vip}: ${JSON.stringify(s.spread)}`);
            }
          }
          const st = nodeStats();
          strictEqual(st.nat_in! >= 200n, true, `nat_in ${st.nat_in}`);
          strictEqual(
            st.nat_out! >= 200n,
            true,
            `nat_out ${st.nat_out} (replies translated on egress)`,
          );
          const [accepted, dropped] = await lab.antiSpoofCounts();
          strictEqual(
            accepted > 0,
            true,
            "the replies passed the anti-spoofing rule with the pod's own address",
          );
          strictEqual(dropped, 0, "nothing a pod sent was dropped as spoofed");
        },
      );

      await t.step("a bulk transfer: the pod's SYN/ACK MSS clamped, no black hole", async () => {
        for (const vip of [VIP, VIP6]) {
          const before = nodeStats().mss_clamped!;
          const out = await lab.peer(["bulk", vip, "80", String(1 << 20), "30000"]);
          const b = lastJson<{ ok: boolean }>(out.stdout);
          strictEqual(b.ok, true, `${vip}: ${out.stdout}`);
          strictEqual(nodeStats().mss_clamped! > before, true, `${vip}: SYN/ACK clamped`);
        }
      });

      await t.step(
        "node agent stopped and restarted: adopts, held connections keep working",
        async () => {
          const go = [1, 2].map((n) => `/tmp/hf-${Deno.pid}-node-go${n}`);
          for (const f of go) await Deno.remove(f).catch(() => {});
          const holder = topo.spawn("client", [
            ...[Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read=/tmp", PEER],
            ...["hold", VIP, "80", "40", ...go],
          ]);
          const phase0 = JSON.parse(
            await holder.waitForLine((l) => l.includes('"phase":0'), { timeoutMs: 30_000 }),
          ) as { held: number };
          strictEqual(phase0.held, 40);
          strictEqual(await agent!.stop(), 0);
          agent = null;
          // No agent: the programs and pinned maps keep serving.
          await Deno.writeTextFile(go[0]!, "");
          const p1 = JSON.parse(
            await holder.waitForLine((l) => l.includes('"phase":1'), { timeoutMs: 30_000 }),
          ) as { same: number; broken: number; moved: number };
          deepStrictEqual(p1, { msg: "phase", phase: 1, same: 40, moved: 0, broken: 0 });
          const before = applied();
          agent = nodeAgent();
          await until(
            "the restarted node agent applied its state",
            () => applied() > before,
            20_000,
          );
          const start = logs.records.filter((r) => r.msg === "starting").pop() as
            | { adopted?: { frontends: number; flows: number } }
            | undefined;
          strictEqual(start?.adopted?.frontends, 2 * PODS.length, "adopted the pinned frontends");
          strictEqual((start?.adopted?.flows ?? 0) >= 40, true, "adopted the recorded flows");
          const last = logs.records.filter((r) => r.msg === "node state applied").pop();
          strictEqual(last?.added, 0, "nothing to rewrite after a restart");
          strictEqual(last?.removed, 0, "nothing removed after a restart");
          // In place: both tc programs replaced on their filter, every pinned map reused as is.
          for (const direction of ["ingress", "egress"]) {
            const swap = logs.records.find((r) =>
              r.msg.startsWith("replaced program on ") && r.direction === direction
            );
            strictEqual(
              typeof swap?.old_prog_id === "number" && swap.old_prog_id > 0 &&
                swap.old_prog_id !== swap.prog_id,
              true,
              `${direction}: ${JSON.stringify(swap)}`,
            );
          }
          strictEqual(
            logs.records.filter((r) => r.msg === "reused map hf_node_flows").length,
            1,
            "the restart reused the pinned flow map",
          );
          await Deno.writeTextFile(go[1]!, "");
          const p2 = JSON.parse(
            await holder.waitForLine((l) => l.includes('"phase":2'), { timeoutMs: 30_000 }),
          ) as { same: number; broken: number };
          deepStrictEqual(p2, { msg: "phase", phase: 2, same: 40, moved: 0, broken: 0 });
          for (const f of go) await Deno.remove(f).catch(() => {});
        },
      );

      await t.step(
        "measured, for docs/backends.md: the reverse translation on the pods' veths (tc ingress) " +
          "instead of the uplink is dropped by the anti-spoofing rule",
        async () => {
          // The same program on the host side of each pod's veth: it rewrites the pod's source
          // to the LB IP before netfilter sees the packet.
          using veth = await NodeDatapath.open({ pinDir: nodePin });
          const at = PODS.map((p) =>
            attachTc(veth.nodeOut, p.veth, {
              netns: topo.ns("node1"),
              direction: "ingress",
              filter: NODE_TC_FILTER,
            })
          );
          try {
            const listing = () => lab.antiSpoofCounts();
            const [, droppedBefore] = await listing();
            const r = await topo.exec("client", [
              ...[Deno.execPath(), "run", "--quiet", "--allow-net", PEER],
              ...["client", VIP, "80", "1", "1"],
            ], { check: false, timeoutMs: 4_000 });
            const [, droppedAfter] = await listing();
            strictEqual(r.stdout.includes('"ok":1'), false, "no connection completes");
            strictEqual(droppedAfter > droppedBefore, true, "the pod's replies dropped as spoofed");
          } finally {
            for (const a of at) a.detach();
          }
        },
      );

      await t.step(
        "a pod deleted: its frontends and flows removed, the other pod serves all",
        async () => {
          const [kept, gone] = [PODS[0]!, PODS[1]!];
          await _ctl.file.load(services([kept]));
          await Deno.writeTextFile(lab.servicesPath, services([kept]));
          await Deno.writeTextFile(lab.podsPath, podsFile([kept]));
          await until(
            "web-2's state removed (both families)",
            () =>
              [
                `pod ${gone.name} ${gone.ip} no longer serves ${VIP}:80/TCP: removed`,
                `pod ${gone.name} ${gone.ip6} no longer serves [${VIP6}]:80/TCP: removed`,
              ].every((line) => logs.records.some((r) => r.msg === line)),
            20_000,
          );
          {
            using svc = pinned("hf_node_svc");
            using svc6 = pinned("hf_node_svc6");
            deepStrictEqual(
              [...svc.entries(), ...svc6.entries()].map(([k, v]) => decodeNodeSvc(k, v).pod),
              [kept.ip, kept.ip6],
            );
            using flows = pinned("hf_node_flows");
            using flows6 = pinned("hf_node_flows6");
            const left = [...flows.entries(), ...flows6.entries()].map(([k, v]) =>
              decodeNodeFlow(k, v)
            );
            strictEqual(
              left.some((f) => f.pod === kept.ip6),
              true,
              "the kept pod's IPv6 flows stay",
            );
            strictEqual(
              left.some((f) => f.pod === gone.ip || f.pod === gone.ip6),
              false,
              "no flow of the deleted pod left",
            );
          }
          // The LB agent follows its file: once it has only web-1, every connection reaches it.
          await until(
            "connections all reach web-1",
            async () => {
              for (const vip of [VIP, VIP6]) {
                const out = await lab.peer(["client", vip, "80", "20", "5"]);
                const s = lastJson<{ ok: number; spread: Record<string, number> }>(out.stdout);
                if (s.ok !== 20 || (s.spread[kept.name] ?? 0) !== 20) return false;
              }
              return true;
            },
            30_000,
            500,
          );
        },
      );
    } finally {
      await agent?.stop();
      await store.close().catch(() => {});
      await Deno.remove(nodePin, { recursive: true }).catch(() => {});
    }
  },
);
