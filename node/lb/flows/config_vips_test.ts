import { deepStrictEqual } from "node:assert/strict";
import { followedVips } from "./config_vips.ts";

Deno.test("followed LB IPs: config frontends united with --vip flags, unique and sorted", () => {
  const config = {
    services: [
      { frontends: [{ address: "10.0.100.10:80/TCP" }, { address: "10.0.100.2:443/TCP" }] },
      { frontends: [] },
      { frontends: [{ address: "10.0.100.2:53/UDP" }] },
    ],
  };
  deepStrictEqual(followedVips(config, []), ["10.0.100.2", "10.0.100.10"], "config only");
  deepStrictEqual(
    followedVips(config, ["10.0.100.2", "10.0.99.1"]),
    ["10.0.99.1", "10.0.100.2", "10.0.100.10"],
    "union",
  );
  deepStrictEqual(followedVips(null, ["10.0.100.1"]), ["10.0.100.1"], "no config");
  deepStrictEqual(followedVips({ services: [] }, []), [], "nothing");
});

Deno.test("followed LB IPs: an address of neither family is named in the error", () => {
  let msg = "";
  try {
    followedVips({ services: [{ frontends: [{ address: "fd00::1:80/TCP" }] }] }, []);
  } catch (err) {
    msg = (err as Error).message;
  }
  if (!msg.includes('"fd00::1:80/TCP"')) throw new Error(`unexpected: "${msg}"`);
});

Deno.test("followed LB IPs: IPv6 frontends are followed too, in RFC 5952 form, after IPv4", () => {
  const config = {
    services: [{
      frontends: [{ address: "[2001:db8:100::1]:80/TCP" }, { address: "10.0.100.1:80/TCP" }],
    }],
  };
  deepStrictEqual(
    followedVips(config, ["2001:DB8:0:0::9"]),
    ["10.0.100.1", "2001:db8:100::1", "2001:db8::9"],
    "both families",
  );
});
