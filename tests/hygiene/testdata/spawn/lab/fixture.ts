// A fixture for tests/hygiene/setup_installs_test.ts: spawns that only this file makes.
// new Deno.Command("in-a-comment") is not a spawn.
const child = new Deno.Command("zorkctl", { args: ["--version"] });
const topo = { exec: (_host: string, _argv: string[]) => Promise.resolve() };
await topo.exec("n1", ["qux-tool", "show"]);
await new Deno.Command("deno", { args: ["run", "--allow-run=ip,blorb-helper", "x.ts"] }).output();
export { child };
