/**
 * The test server's Service rules, driven with kubectl as an operator would: selector keys,
 * `externalTrafficPolicy`, `loadBalancerClass` (format, type, immutability), the primary cluster
 * IP's immutability, node port and cluster IP allocation (range, one owner, freed on delete and
 * on a type change), and the fields a type change drops (dropTypeDependentFields).
 */
import { deepStrictEqual, match } from "node:assert/strict";
import { parse } from "yaml";
import { kubectlEnv } from "./_kubectl.ts";
import { refused, serviceYaml } from "./_refuse.ts";

const QUALIFIED =
  "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LB = { type: "LoadBalancer", loadBalancerClass: "holdfast.io/lb" };
const create = ["create", "-f", "-"];

Deno.test("service validation: selector, traffic policies, loadBalancerClass", async (t) => {
  await using env = await kubectlEnv();
  await t.step("a selector key 'a b' is refused", async () => {
    await refused(
      env,
      create,
      serviceYaml("web", { selector: { "a b": "x" } }),
      `The Service "web" is invalid: spec.selector: Invalid value: "a b": ${QUALIFIED}`,
    );
  });
  await t.step("port names are RFC 1123 labels, unique", async () => {
    await refused(
      env,
      create,
      serviceYaml("web", { ports: [{ name: "HTTP", port: 80 }] }),
      'spec.ports[0].name: Invalid value: "HTTP": a lowercase RFC 1123 label must consist of',
    );
    await refused(
      env,
      create,
      serviceYaml("web", { ports: [{ name: "a", port: 80 }, { name: "a", port: 81 }] }),
      'spec.ports[1].name: Duplicate value: "a"',
    );
  });
  await t.step("externalTrafficPolicy: Bogus is refused, Local accepted", async () => {
    await refused(
      env,
      create,
      serviceYaml("web", { ...LB, externalTrafficPolicy: "Bogus" }),
      'spec.externalTrafficPolicy: Unsupported value: "Bogus": supported values: "Cluster", "Local"',
    );
    await env.ok(create, serviceYaml("local", { ...LB, externalTrafficPolicy: "Local" }));
  });
  await t.step("externalTrafficPolicy on a ClusterIP Service is refused", async () => {
    await refused(
      env,
      create,
      serviceYaml("web", { externalTrafficPolicy: "Cluster" }),
      'spec.externalTrafficPolicy: Invalid value: "Cluster": may only be set for externally-accessible services',
    );
  });
  await t.step("loadBalancerClass 'Bad Class' is refused", async () => {
    await refused(
      env,
      create,
      serviceYaml("web", { ...LB, loadBalancerClass: "Bad Class" }),
      `spec.loadBalancerClass: Invalid value: "Bad Class": ${QUALIFIED}`,
    );
  });
  await t.step(
    "loadBalancerClass and allocateLoadBalancerNodePorts on ClusterIP are refused",
    async () => {
      await refused(
        env,
        create,
        serviceYaml("web", { loadBalancerClass: "holdfast.io/lb" }),
        "spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'",
      );
      await refused(
        env,
        create,
        serviceYaml("web", { allocateLoadBalancerNodePorts: true }),
        "spec.allocateLoadBalancerNodePorts: Forbidden: may only be used when `type` is 'LoadBalancer'",
      );
    },
  );
  await t.step(
    "loadBalancerClass may not change, be set or be removed on a LoadBalancer",
    async () => {
      await env.ok(create, serviceYaml("lb", LB));
      const patch = (p: string) => ["patch", "service", "lb", "--type=merge", "-p", p];
      await refused(
        env,
        patch('{"spec":{"loadBalancerClass":"other.io/lb"}}'),
        undefined,
        'spec.loadBalancerClass: Invalid value: "other.io/lb": may not change once set',
      );
      await refused(
        env,
        patch('{"spec":{"loadBalancerClass":null}}'),
        undefined,
        "spec.loadBalancerClass: Invalid value: null: may not change once set",
      );
      await env.ok(create, serviceYaml("noclass", { type: "LoadBalancer" }));
      await refused(
        env,
        [
          "patch",
          "service",
          "noclass",
          "--type=merge",
          "-p",
          '{"spec":{"loadBalancerClass":"a.io/b"}}',
        ],
        undefined,
        'spec.loadBalancerClass: Invalid value: "a.io/b": may not change once set',
      );
    },
  );
});

Deno.test("service validation: cluster IPs are immutable, unique and in range", async (t) => {
  await using env = await kubectlEnv();
  await env.ok(create, serviceYaml("a"));
  const ip = (await env.ok(["get", "svc", "a", "-o", "jsonpath={.spec.clusterIP}"])).trim();
  match(ip, /^10\.96\./);
  await t.step("spec.clusterIP may not change", async () => {
    await refused(
      env,
      ["patch", "service", "a", "--type=merge", "-p", '{"spec":{"clusterIP":"10.96.9.9"}}'],
      undefined,
      'spec.clusterIPs[0]: Invalid value: []string{"10.96.9.9"}: may not change once set',
    );
  });
  await t.step("an explicit clusterIP in use is refused", async () => {
    await refused(
      env,
      create,
      serviceYaml("b", { clusterIP: ip }),
      `spec.clusterIPs: Invalid value: []string{"${ip}"}: failed to allocate IP ${ip}: provided IP is already allocated`,
    );
  });
  await t.step("an explicit clusterIP outside the service range is refused", async () => {
    await refused(
      env,
      create,
      serviceYaml("b", { clusterIP: "10.0.0.1" }),
      "failed to allocate IP 10.0.0.1: the provided IP (10.0.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/16",
    );
  });
  await t.step(
    "automatic cluster IPs skip explicit ones; a deleted Service's IP is free",
    async () => {
      await env.ok(create, serviceYaml("explicit", { clusterIP: "10.96.0.2" }));
      await env.ok(create, serviceYaml("auto"));
      const auto = (await env.ok(["get", "svc", "auto", "-o", "jsonpath={.spec.clusterIP}"]))
        .trim();
      deepStrictEqual(auto !== "10.96.0.2" && auto !== ip, true, `auto got ${auto}`);
      await env.ok(["delete", "svc", "a"]);
      await env.ok(create, serviceYaml("b", { clusterIP: ip }));
    },
  );
});

Deno.test("service validation: node ports in 30000-32767, one owner each", async (t) => {
  await using env = await kubectlEnv();
  const np = (name: string, nodePort?: number, type = "NodePort") =>
    serviceYaml(name, {
      type,
      ports: [{ name: "http", port: 80, ...nodePort ? { nodePort } : {} }],
    });
  await t.step("a nodePort outside the range is refused", async () => {
    await refused(
      env,
      create,
      np("web", 29999),
      "spec.ports[0].nodePort: Invalid value: 29999: provided port is not in the valid range. The range of valid ports is 30000-32767",
    );
  });
  await t.step(
    "a nodePort another Service holds is refused; free again once it is deleted",
    async () => {
      await env.ok(create, np("first", 30080));
      await refused(
        env,
        create,
        np("second", 30080, "LoadBalancer"),
        'The Service "second" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated',
      );
      await env.ok(["delete", "svc", "first"]);
      await env.ok(create, np("second", 30080, "LoadBalancer"));
    },
  );
  await t.step("automatic node ports skip those in use", async () => {
    await env.ok(create, np("explicit", 30000));
    await env.ok(create, np("auto"));
    const port = await env.ok(["get", "svc", "auto", "-o", "jsonpath={.spec.ports[0].nodePort}"]);
    deepStrictEqual(["30000", "30080"].includes(port.trim()), false, `auto got ${port}`);
  });
  await t.step("a nodePort on a ClusterIP Service is refused", async () => {
    await refused(
      env,
      create,
      np("web", 30100, "ClusterIP"),
      "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
    );
  });
});

Deno.test("service validation: a health-check node port for LoadBalancer + Local only", async (t) => {
  await using env = await kubectlEnv();
  const hc = async (name: string) =>
    (await env.ok(["get", "svc", name, "-o", "jsonpath={.spec.healthCheckNodePort}"])).trim();
  await t.step("allocated for externalTrafficPolicy Local", async () => {
    await env.ok(create, serviceYaml("local", { ...LB, externalTrafficPolicy: "Local" }));
    match(await hc("local"), /^3\d{4}$/);
  });
  await t.step("refused elsewhere", async () => {
    await refused(
      env,
      create,
      serviceYaml("web", { ...LB, healthCheckNodePort: 31000 }),
      "spec.healthCheckNodePort: Forbidden: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
    );
  });
  await t.step("one in use is refused as the real server does (500)", async () => {
    const port = Number(await hc("local"));
    const body = serviceYaml("dup", {
      ...LB,
      externalTrafficPolicy: "Local",
      healthCheckNodePort: port,
    });
    await refused(
      env,
      create,
      body,
      `Internal error occurred: failed to allocate requested HealthCheck NodePort ${port}: provided port is already allocated`,
    );
  });
  await t.step("Local → Cluster drops it, and it is free again", async () => {
    const port = Number(await hc("local"));
    await env.ok([
      "patch",
      "service",
      "local",
      "--type=merge",
      "-p",
      '{"spec":{"externalTrafficPolicy":"Cluster"}}',
    ]);
    deepStrictEqual(await hc("local"), "");
    await env.ok(
      create,
      serviceYaml("np", { type: "NodePort", ports: [{ port: 80, nodePort: port }] }),
    );
  });
});

Deno.test("service validation: a type change drops what the new type does not use", async (t) => {
  await using env = await kubectlEnv();
  const setUp = async (name: string) => {
    await env.ok(create, serviceYaml(name, { ...LB, externalTrafficPolicy: "Local" }));
    await env.ok([
      "patch",
      "service",
      name,
      "--subresource=status",
      "--type=merge",
      "-p",
      '{"status":{"loadBalancer":{"ingress":[{"ip":"10.0.100.1"}]}}}',
    ]);
    return parse(await env.ok(["get", "svc", name, "-o", "yaml"]));
  };
  await t.step("LoadBalancer → ClusterIP by merge patch", async () => {
    const before = await setUp("web");
    const nodePort = before.spec.ports[0].nodePort;
    await env.ok([
      "patch",
      "service",
      "web",
      "--type=merge",
      "-p",
      '{"spec":{"type":"ClusterIP"}}',
    ]);
    const after = parse(await env.ok(["get", "svc", "web", "-o", "yaml"]));
    deepStrictEqual(after.spec.type, "ClusterIP");
    for (
      const f of ["loadBalancerClass", "allocateLoadBalancerNodePorts", "externalTrafficPolicy"]
    ) {
      deepStrictEqual(after.spec[f], undefined, `${f} is dropped`);
    }
    deepStrictEqual(after.spec.ports[0].nodePort, undefined, "node ports are dropped");
    deepStrictEqual(after.spec.clusterIP, before.spec.clusterIP, "the cluster IP stays");
    deepStrictEqual(after.status.loadBalancer, {}, "status.loadBalancer is cleared");
    // The dropped node port is free for another Service.
    await env.ok(
      create,
      serviceYaml("other", { type: "NodePort", ports: [{ port: 80, nodePort }] }),
    );
  });
  await t.step("a dependent field the client changed too is kept, and refused", async () => {
    await setUp("keep");
    await refused(
      env,
      [
        "patch",
        "service",
        "keep",
        "--type=merge",
        "-p",
        '{"spec":{"type":"ClusterIP","externalTrafficPolicy":"Cluster"}}',
      ],
      undefined,
      'spec.externalTrafficPolicy: Invalid value: "Cluster": may only be set for externally-accessible services',
    );
  });
  await t.step("LoadBalancer → NodePort keeps node ports and the traffic policy", async () => {
    const before = await setUp("np");
    await env.ok(["patch", "service", "np", "--type=merge", "-p", '{"spec":{"type":"NodePort"}}']);
    const after = parse(await env.ok(["get", "svc", "np", "-o", "yaml"]));
    deepStrictEqual(after.spec.ports[0].nodePort, before.spec.ports[0].nodePort);
    deepStrictEqual(after.spec.externalTrafficPolicy, "Local");
    deepStrictEqual([after.spec.loadBalancerClass, after.status.loadBalancer], [undefined, {}]);
  });
  await t.step("→ ExternalName drops cluster IPs and families; the IP is free again", async () => {
    const before = await setUp("ext");
    await env.ok([
      "patch",
      "service",
      "ext",
      "--type=merge",
      "-p",
      '{"spec":{"type":"ExternalName","externalName":"web.example.com"}}',
    ]);
    const after = parse(await env.ok(["get", "svc", "ext", "-o", "yaml"]));
    deepStrictEqual(
      [after.spec.clusterIP, after.spec.clusterIPs, after.spec.ipFamilies],
      [undefined, undefined, undefined],
    );
    await env.ok(create, serviceYaml("reuse", { clusterIP: before.spec.clusterIP }));
  });
});
