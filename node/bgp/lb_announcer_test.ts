import { deepStrictEqual } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { LbModelBgp } from "./lb_announcer.ts";

const BGP = {
  localAsn: 65100,
  prefixes: ["10.0.100.0/24"],
  communities: [],
  peers: [{ address: "10.9.1.1", asn: 65000 }],
};

function follower(options: { routerId?: string; fileWins?: boolean } = {}) {
  return new LbModelBgp({
    nodeName: "n1",
    routerId: options.routerId,
    fileWins: options.fileWins,
    wanted: () => [],
    dir: "/nonexistent/hf-bgp-unit", // never used: these cases start no bird
  });
}

Deno.test("LB node BGP from the model: nothing before ready, --bgp-config wins, a refused section or no node address starts no bird and says why once", async () => {
  using logs = captureLogs();
  const msgs = () => logs.records.map((r) => r.msg);

  const waiting = follower({ routerId: "10.9.1.2", fileWins: true });
  waiting.set(BGP);
  await waiting.settled();
  deepStrictEqual(msgs(), [], "not armed: nothing happens");
  waiting.arm();
  waiting.set(BGP);
  await waiting.settled();
  deepStrictEqual(msgs(), ["BGP settings of the model ignored: --bgp-config wins"]);
  deepStrictEqual(waiting.announcer, null);

  logs.records.length = 0;
  const refused = follower({ routerId: "10.9.1.2" });
  refused.arm();
  refused.set({ refused: "Invalid BGP settings at spec.bgp.localAsn: AS_TRANS" });
  refused.set({ refused: "Invalid BGP settings at spec.bgp.localAsn: AS_TRANS" });
  await refused.settled();
  deepStrictEqual(msgs(), ["BGP section refused by the controller; the running settings stay"]);
  deepStrictEqual(refused.announcer, null);

  logs.records.length = 0;
  const noAddress = follower();
  noAddress.arm();
  noAddress.set(BGP);
  await noAddress.settled();
  deepStrictEqual(msgs(), ["cannot announce through BGP: no node address for the router id"]);
  noAddress.set(undefined);
  await noAddress.stop();
  deepStrictEqual(noAddress.announcer, null);
});
