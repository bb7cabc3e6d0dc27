import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { CoreV1Api, CustomObjectsApi, NetworkingV1Api, NodeV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderKubeRun, SANDBOX_API } from '../../src/launch/kubernetes/objects.js';
import { BERTH_POD_LABELS, renderNetworkPolicy } from '../../src/launch/kubernetes/network-policy.js';
import { contractHome, CONTRACT_OWNER, PROTECTED_TEXT } from '../contract/contract-plan.js';
import type { Launcher } from '../../src/launch/launcher.js';
import { KUBE_NO_FILE_TOOLS } from '../../src/config/kubernetes.js';
import { LABELS } from '../../src/plan/labels.js';
import { testHome, type TestHome } from '../helpers.js';
import { installationId } from '../../src/main.js';
import type { KubeCluster } from '../helpers/kube-cluster.js';
import { isRealKube, startKubeRig, type KubeRig } from '../helpers/kube-rig.js';
import { startLoopbackSite } from '../helpers/loopback-site.js';
import { freePort } from '../helpers/chaos-rigs.js';
import { checkAgainstOpenApi, keptFields, type OpenApiDoc } from '../helpers/openapi-check.js';
import { plannedBoundary, receiptOf } from '../../src/plan/receipt.js';

/**
 * berth on Kubernetes, end to end, against a real kube-apiserver (v1.20.2, built from Debian's
 * source) with agent-sandbox's CRDs: a chat message goes through the runner to a Sandbox, which
 * the fake agent-sandbox controller turns into a Pod, which the test kubelet runs on the local
 * Docker engine; the command is a pods/exec through the API server; the pod reaches berth's
 * egress proxy through berth-bridge's TCP relay with the run's token. The fakes stand for the
 * parts of a cluster no package here ships (test/fakes/kubelet.ts, agent-sandbox-controller.ts).
 */

let rig: KubeRig;
let cluster: KubeCluster;
let h: TestHome;
let launcher: Launcher;
let NS = '';

beforeAll(async () => {
  rig = await startKubeRig();
  ({ cluster, launcher, namespace: NS } = rig);
  // No checkpoints (a copy pod before each message): kube-checkpoints.test.ts is about them.
  h = testHome({ launcher, warm: false, pool: 'off', config: 'launcher: kubernetes\ncheckpoints: { keep: 0 }\n' });
}, 600_000);

afterAll(async () => {
  await h?.[Symbol.asyncDispose]();
  await rig?.stop();
});

const custom = () => cluster.kubeConfig.makeApiClient(CustomObjectsApi);
const sandboxes = async () =>
  (
    (await custom().listNamespacedCustomObject({
      group: SANDBOX_API.group,
      version: SANDBOX_API.version,
      namespace: NS,
      plural: SANDBOX_API.plural,
    })) as { items: unknown[] }
  ).items;

describe('the Kubernetes launcher, end to end', () => {
  it("answers a message from a pod the cluster ran: the plan's user, a read-only root, its own workspace volume, nothing left after", async () => {
    h.create({ name: 'kube', workspace_isolation: true, agent: 'shell' });
    const r = await h.run(
      'kube',
      'web:alice',
      'id -u; echo made > /workspace/note.txt; touch /etc/x 2>/dev/null || echo root-ro; cat /workspace/note.txt',
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.split('\n')).toEqual(expect.arrayContaining(['10001', 'root-ro', 'made']));
    expect(await sandboxes()).toEqual([]);
    expect(await launcher.listManaged({ installation: installationId(h.home) })).toEqual([]);
    // The next run of the same person finds the volume; another person's run has its own.
    const again = await h.run('kube', 'web:alice', 'cat /workspace/note.txt');
    expect(again.stdout).toBe('made\n');
    const bob = await h.run('kube', 'web:bob', 'cat /workspace/note.txt 2>&1; echo rc=$?');
    expect(bob.stdout).toMatch(/No such file[\s\S]*rc=1/);
    const claims = await cluster.kubeConfig.makeApiClient(CoreV1Api).listNamespacedPersistentVolumeClaim({ namespace: NS });
    expect(claims.items.map((c) => c.metadata?.name).filter((n) => n?.startsWith('berth-ws-'))).toHaveLength(2);
  });

  it("reaches the egress proxy from the pod only through the relay, with the run's token", async () => {
    const site = await startLoopbackSite();
    try {
      await h.berth.operator.setConfig(['egress', 'private_hosts'], [`localhost:${site.port}`]);
      h.create({ name: 'kube-egress', workspace_isolation: true, agent: 'shell', egress: { allow: [`localhost:${site.port}`] } });
      const r = await h.run(
        'kube-egress',
        'web:alice',
        `wget -qO- http://localhost:${site.port}/through-the-relay 2>&1; echo rc=$?; echo "token=\${#BERTH_RELAY_TOKEN}"`,
        'medium',
      );
      expect(r.stdout).toContain('fetched /through-the-relay');
      expect(r.stdout).toContain('rc=0');
      expect(r.stdout).toContain('token=64');
      expect(site.hits()).toBe(1);
      // Its receipt: the pod observed as the launcher plans it (the run directory relayed, not mounted).
      const receipt = h.berth.admin.listRuns('kube-egress', { limit: 1 }).runs[0]?.receipt;
      expect(receipt?.violations, JSON.stringify(receipt)).toEqual([]);
      expect(receipt?.unobserved).toEqual(['interfaces']);
      // The pod is gone, and its token with it: the relay refuses the token it held.
    } finally {
      site.close();
      await h.berth.operator.unsetConfig(['egress', 'private_hosts']);
    }
  });

  it("moves aside what a tenant left where a protected path is mounted (a link, a file in place of a directory) before the agent starts, as Docker's prepare step does", async () => {
    h.create({ name: 'kube-prep', workspace_isolation: true, agent: 'shell' });
    // Before the operator protects them: the tenant's links where the protected paths will be.
    const planted = await h.run(
      'kube-prep',
      'web:alice',
      'echo mine > mine.md && ln -s mine.md AGENTS.md && mkdir -p mydir && ln -s mydir .cfg && echo planted',
    );
    expect(planted.stdout, planted.stderr).toBe('planted\n');
    const project = h.berth.store.get('kube-prep');
    fs.writeFileSync(join(project.paths.dir, 'AGENTS.md'), "operator's rules\n");
    fs.mkdirSync(join(project.paths.dir, '.cfg'));
    fs.writeFileSync(join(project.paths.dir, '.cfg', 'settings.json'), '{"hooks": "none"}\n');
    await h.berth.store.update('kube-prep', { protected_paths: ['AGENTS.md', '.cfg/settings.json'] });
    const r = await h.run(
      'kube-prep',
      'web:alice',
      [
        'cat AGENTS.md .cfg/settings.json',
        'test -L AGENTS.md && echo agents-is-link',
        'test -L .cfg && echo cfg-is-link',
        'rm -f AGENTS.md 2>/dev/null; mv .cfg/settings.json x 2>/dev/null; cat AGENTS.md .cfg/settings.json',
        'cat mine.md mydir/settings.json 2>&1',
        'ls -a | grep -c displaced-by-berth',
      ].join('; '),
    );
    expect(r.stdout.split('\n')).toEqual([
      "operator's rules",
      '{"hooks": "none"}',
      // Still the operator's: the mounts are on real entries, which nothing in the pod can remove.
      "operator's rules",
      '{"hooks": "none"}',
      // The tenant's own files are kept, under a telling name where they were in the way.
      'mine',
      "cat: can't open 'mydir/settings.json': No such file or directory",
      '2',
      '',
    ]);
    // A tenant that locks a directory on the way to a protected path stops its own runs, with the reason.
    await h.run('kube-prep', 'web:alice', 'chmod 0 .cfg');
    const locked = await h.run('kube-prep', 'web:alice', 'echo never').catch((err: unknown) => err);
    expect(locked).toMatchObject({
      code: 'RUN_FAILED',
      message: expect.stringMatching(
        /its prepare step ended \(Error 1: berth-bridge prepare: \.cfg\/settings\.json: \.cfg: Permission denied/,
      ),
    });
    expect(await sandboxes()).toEqual([]);
  });

  it("mounts a granted shared area as the operator's PVC, read-only; a project without the grant has no /shared", async () => {
    await cluster.kubeConfig.makeApiClient(CoreV1Api).createNamespacedPersistentVolumeClaim({
      namespace: NS,
      body: { metadata: { name: 'team-docs' }, spec: { accessModes: ['ReadOnlyMany'], resources: { requests: { storage: '1Gi' } } } },
    });
    const docsDir = await rig.claimDir('team-docs');
    fs.mkdirSync(docsDir, { recursive: true });
    fs.writeFileSync(join(docsDir, 'handbook.md'), 'the team handbook\n');
    // berth's own view of the area (its checks want an existing directory): in a cluster, berth's pod mounts the same claim there.
    const areaDir = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-area-')));
    const operator = h.berth.operator;
    try {
      await operator.setConfig(['shared_workspaces', 'docs'], areaDir);
      // A grant before the area has a volume on the cluster is refused, naming what is missing.
      h.create({ name: 'kube-shared', workspace_isolation: true, agent: 'shell' });
      h.create({ name: 'kube-unshared', workspace_isolation: true, agent: 'shell' });
      await expect(operator.setConfig(['projects', 'kube-shared', 'shared_access'], ['docs'])).rejects.toMatchObject({
        code: 'CONFIG_INVALID',
        details: {
          issues: [{ field: 'projects.kube-shared.shared_access.0', reason: expect.stringContaining('kubernetes.shared_claims.docs') }],
        },
      });
      await operator.setConfig(['kubernetes', 'shared_claims', 'docs'], 'team-docs');
      await operator.setConfig(['projects', 'kube-shared', 'shared_access'], ['docs']);
      const r = await h.run('kube-shared', 'web:alice', 'cat /shared/docs/handbook.md; touch /shared/docs/x 2>/dev/null || echo read-only');
      expect(r.stdout, r.stderr).toBe('the team handbook\nread-only\n');
      const other = await h.run('kube-unshared', 'web:alice', 'ls /shared 2>&1; echo rc=$?');
      expect(other.stdout).toMatch(/No such file[\s\S]*rc=1/);
    } finally {
      await operator.unsetConfig(['projects', 'kube-shared']).catch(() => undefined);
      await operator.unsetConfig(['kubernetes']).catch(() => undefined);
      await operator.unsetConfig(['shared_workspaces', 'docs']).catch(() => undefined);
      fs.rmSync(areaDir, { recursive: true, force: true });
    }
  });

  it("offers the pod's agent no file tools (they serve berth's host copies), and says why, through the relay", async () => {
    h.create({ name: 'kube-tools', workspace_isolation: true, agent: 'shell' });
    const init = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' } },
    });
    const list = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const r = await h.run('kube-tools', 'web:alice', `printf '%s\\n%s\\n' '${init}' '${list}' | berth-bridge`);
    const answers = r.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: number; result: { instructions?: string; tools?: unknown[] } });
    expect(answers.find((a) => a.id === 1)?.result.instructions).toBe(KUBE_NO_FILE_TOOLS);
    expect(answers.find((a) => a.id === 2)?.result.tools).toEqual([]);
  });

  it('stops a run past its timeout: exit 137, the pod removed', async () => {
    h.create({ name: 'kube-slow', workspace_isolation: true, agent: 'shell', limits: { timeout_seconds: 2 } });
    // Its own end would say "never" (no wall-clock bound: a busy host is slow to delete a pod).
    const r = await h.run('kube-slow', 'web:alice', 'echo started; sleep 60; echo never');
    expect(r.timedOut).toBe(true);
    expect(r.exitCode).toBe(137);
    expect(r.stdout).toBe('started\n');
    expect(await sandboxes()).toEqual([]);
  });
});

describe('warm sessions on Kubernetes', () => {
  it("a session's next message is an exec into its pod, once its keep-alive's report says the last left nothing; one that leaves a process gets the session a new pod", async () => {
    await using w = testHome({ launcher, warm: true, pool: 'off', config: 'launcher: kubernetes\ncheckpoints: { keep: 0 }\n' });
    const installation = installationId(w.home);
    w.create({ name: 'kube-warm', workspace_isolation: true, agent: 'shell' });
    const first = await w.run('kube-warm', 'web:alice', 'echo one > /tmp/state; echo made');
    expect(first).toMatchObject({ exitCode: 0, warm: false, stdout: 'made\n' });
    // Idle between messages: the session's Sandbox stays, and nothing else.
    const idle = await launcher.listManaged({ installation });
    expect(idle.map((c) => c.id)).toEqual([first.containerId]);
    const second = await w.run('kube-warm', 'web:alice', 'cat /tmp/state');
    expect(second).toMatchObject({ exitCode: 0, warm: true, stdout: 'one\n', containerId: first.containerId });
    // Another person's session is a pod of its own.
    const bob = await w.run('kube-warm', 'web:bob', 'cat /tmp/state 2>&1; echo rc=$?');
    expect(bob).toMatchObject({ warm: false });
    expect(bob.containerId).not.toBe(first.containerId);
    expect(bob.stdout).toMatch(/No such file[\s\S]*rc=1/);
    // A process left running: the pod is removed after the message (its answer is kept) ...
    const left = await w.run('kube-warm', 'web:alice', 'sleep 600 > /dev/null 2>&1 & echo left');
    expect(left).toMatchObject({ exitCode: 0, warm: true, stdout: 'left\n' });
    await expect
      .poll(async () => (await launcher.listManaged({ installation })).map((c) => c.id), { timeout: 15_000 })
      .not.toContain(first.containerId);
    // ... and the session's next message starts a new one, on the same volumes.
    const after = await w.run('kube-warm', 'web:alice', 'cat /tmp/state 2>/dev/null || echo fresh');
    expect(after).toMatchObject({ exitCode: 0, warm: false, stdout: 'fresh\n' });
    expect(after.containerId).not.toBe(first.containerId);
    // A protected path's directory renamed (its mount goes along) and replaced: that pod is not kept either.
    await w.berth.store.update('kube-warm', { protected_paths: ['.factory/mcp.json'] });
    const base = await w.run('kube-warm', 'web:carol', 'cat .factory/mcp.json > /dev/null && echo ok');
    const moved = await w.run(
      'kube-warm',
      'web:carol',
      'mv .factory .moved && mkdir .factory && echo evil > .factory/mcp.json && echo replaced',
    );
    expect([base.stdout, moved.stdout, moved.warm, moved.containerId]).toEqual(['ok\n', 'replaced\n', true, base.containerId]);
    const next = await w.run('kube-warm', 'web:carol', 'cat .factory/mcp.json');
    expect(next.warm).toBe(false);
    expect(next.stdout).toContain('"mcpServers"');
    const ms = (r: { timings: { totalMs: number } }) => Math.round(r.timings.totalMs);
    console.info(`kubernetes warm session: first message ${ms(first)} ms (a new pod), second ${ms(second)} ms (an exec into it)`);
  });
});

describe('berth.yaml launcher: kubernetes', () => {
  it('is all a berth needs: the launcher loaded on first use, its relay listener as serve opens it', async () => {
    const port = await freePort();
    const yaml = [
      'launcher: kubernetes',
      'kubernetes:',
      `  kubeconfig: ${rig.berthKubeConfigFile}`,
      `  namespace: ${NS}`,
      `  gateway: { listen: "${rig.gatewayIp}:${port}", address: "${rig.gatewayIp}:${port}" }`,
      '  start_timeout_seconds: 60',
      '',
    ].join('\n');
    await using own = testHome({ warm: false, pool: 'off', config: yaml });
    const relay = own.berth.kubeRelay;
    expect(relay).toMatchObject({ host: rig.gatewayIp, port });
    await new Promise<void>((r) => relay!.server.listen(relay!.port, relay!.host, r));
    const site = await startLoopbackSite();
    try {
      await own.berth.operator.setConfig(['egress', 'private_hosts'], [`localhost:${site.port}`]);
      own.create({ name: 'from-yaml', workspace_isolation: true, agent: 'shell', egress: { allow: [`localhost:${site.port}`] } });
      const r = await own.run('from-yaml', 'web:carol', `wget -qO- http://localhost:${site.port}/via-berth-yaml; id -u`, 'medium');
      expect(r.stdout).toBe('fetched /via-berth-yaml\n10001\n');
      expect((await own.berth.launcher.info()).name).toBe('Kubernetes v1.20.2');
    } finally {
      site.close();
      relay!.server.close();
    }
  });

  it('refuses a kubeconfig it cannot read, naming the field', () => {
    expect(() => testHome({ warm: false, config: 'launcher: kubernetes\nkubernetes: { kubeconfig: /nonexistent/kubeconfig }\n' })).toThrow(
      expect.objectContaining({
        code: 'CONFIG_INVALID',
        details: expect.objectContaining({ issues: [{ field: 'kubernetes.kubeconfig', reason: 'cannot be read' }] }),
      }),
    );
  });
});

describe('the Kubernetes launcher on its own', () => {
  const contract = contractHome({ image: 'berth/shell:latest', runtime: 'runc' });
  afterAll(() => contract.cleanup());

  it("passes exit codes through, answers 127 for a command the image lacks, serves protected paths read-only from berth's snapshot", async () => {
    const exit3 = await launcher.run(contract.plan({ argv: ['sh', '-c', 'echo out; echo err >&2; exit 3'] }));
    expect(exit3).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'err\n', truncated: false, timedOut: false });
    const missing = await launcher.run(contract.plan({ argv: ['no-such-command'] }));
    expect(missing).toMatchObject({ exitCode: 127, stderr: 'no-such-command: not found in image berth/shell:latest\n' });
    const prot = await launcher.run(
      contract.plan({ argv: ['sh', '-c', 'cat /workspace/AGENTS.md; echo x > /workspace/AGENTS.md 2>/dev/null || echo refused'] }),
    );
    expect(prot.stdout).toBe(`${PROTECTED_TEXT}refused\n`);
  });

  it("runs a runsc project in gVisor through its RuntimeClass: each exec under berth-bridge's seccomp filter (runsc gives the profile to the first process only), 127 for a missing command, no warm pods", async () => {
    await cluster.kubeConfig
      .makeApiClient(NodeV1Api)
      .createRuntimeClass({ body: { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name: 'runsc' }, handler: 'runsc' } });
    const gvisor = contractHome({ image: 'berth/shell:latest', runtime: 'runsc' });
    try {
      if (isRealKube()) {
        // The real node is a dockershim kubelet, which has no runtime handlers ("RuntimeHandler
        // \"runsc\" not supported"): the pod never starts, and the run fails (containerd with
        // runsc's shim is what a real cluster needs; docs/kubernetes.md). Only the test kubelet
        // maps a RuntimeClass to Docker's runsc, so gVisor through it is proven on the fake alone.
        // berth reads the kubelet's event and fails at once, in its words.
        const refused = await launcher.run(gvisor.plan({ argv: ['true'] })).catch((err: unknown) => err);
        expect(refused).toMatchObject({ code: 'POD_REFUSED', message: expect.stringContaining('runsc') });
        return;
      }
      // gVisor's sentry says it is Linux 4.4.0, whatever the host runs.
      const r = await launcher.run(gvisor.plan({ argv: ['sh', '-c', 'grep ^Seccomp: /proc/self/status; uname -r'] }));
      expect(r, r.stderr).toMatchObject({ exitCode: 0, stdout: 'Seccomp:\t2\n4.4.0\n' });
      expect(os.release()).not.toBe('4.4.0');
      const missing = await launcher.run(gvisor.plan({ argv: ['no-such-command'] }));
      expect(missing).toMatchObject({ exitCode: 127, stderr: 'no-such-command: not found in image berth/shell:latest\n' });
      // gVisor mounts no cgroup filesystem in the pod: the keep-alive's report has no memory, so no pod is kept.
      const caps = await launcher.capabilities();
      expect([caps.warm('runsc'), caps.warm('runc')]).toEqual([false, true]);
    } finally {
      await gvisor.cleanup();
      // One cluster serves the whole real tier: the class goes with the case.
      await cluster.kubeConfig.makeApiClient(NodeV1Api).deleteRuntimeClass({ name: 'runsc' });
    }
  });

  it('observes a pod for its receipt: what the API server keeps of it and what its kernel shows, as planned; what a pod cannot show stays unobserved', async () => {
    const plan = contract.plan({ argv: ['true'] });
    const { containerId } = await launcher.startIdle(plan, plan.keepAlive);
    try {
      const observed = await launcher.observe!(containerId);
      const policy = { start: 'warm' as const, folder: 'own' as const, egress: false, allow: [], secrets: [] };
      const receipt = receiptOf(plannedBoundary(plan), observed, policy);
      expect(receipt.violations).toEqual([]);
      expect(receipt.unobserved).toEqual(['interfaces']);
      expect(observed.seen_from).toMatchObject({
        runtime: 'engine',
        namespaces: 'engine',
        limits: 'engine',
        seccomp: 'inside',
        mounts: 'inside',
      });
      expect(observed.limits).toEqual({ memory_bytes: plan.limits.memoryBytes, nano_cpus: plan.limits.nanoCpus });
      expect(observed.mounts!.map((m) => m.target)).toEqual(expect.arrayContaining(['/workspace']));
      expect(await launcher.observe!(containerId)).toBe(observed); // read once per pod
    } finally {
      await launcher.removeContainers([containerId]);
    }
  });

  it("gives the pod the plan's strings as they are: the kubelet expands no $(NAME) of berth's", async () => {
    const base = contract.plan({ argv: ['true'] });
    const plan = { ...base, env: { ...base.env, PROBE: 'a$(HOME)b$$c$' } };
    const { containerId } = await launcher.startIdle(plan, plan.keepAlive);
    try {
      // What the kubelet made of the pod's env: the container's own, as the engine has it.
      const docker = new Docker();
      const id = rig.kubelet.containerOf(NS, containerId);
      const env = ((await docker.getContainer(id ?? 'none').inspect()).Config.Env ?? []).filter((e) => e.startsWith('PROBE='));
      expect(env).toEqual(['PROBE=a$(HOME)b$$c$']);
    } finally {
      await launcher.removeContainers([containerId]);
    }
  });

  it("bounds output: past the plan's cap the run is stopped and the output cut there", async () => {
    const plan = contract.plan({ argv: ['sh', '-c', 'while true; do echo berth-flood; done'], limits: { output_bytes: 4096 } });
    const r = await launcher.run(plan);
    expect(r.truncated).toBe(true);
    expect(r.stdout.length + r.stderr.length).toBeLessThanOrEqual(4096);
    expect(r.exitCode).toBe(137);
  });

  it('lists and removes by labels, and a starting berth reaps what a dead berth left', async () => {
    const installation = installationId(h.home);
    const mine = (o: Parameters<typeof contract.plan>[0], owner: string) => {
      const p = contract.plan(o);
      return { ...p, labels: { ...p.labels, [LABELS.installation]: installation, [LABELS.owner]: owner } };
    };
    const a = mine({ argv: ['true'], project: 'p1' }, CONTRACT_OWNER);
    const b = mine({ argv: ['true'], project: 'p2' }, CONTRACT_OWNER);
    await launcher.startIdle(a, a.keepAlive);
    await launcher.startIdle(b, b.keepAlive);
    const listed = await launcher.listManaged({ installation });
    expect(listed.map((c) => [c.project, c.workspace, c.owner]).sort()).toEqual([
      ['p1', 'a', CONTRACT_OWNER],
      ['p2', 'a', CONTRACT_OWNER],
    ]);
    expect(await launcher.removeManaged({ installation, project: 'p1' })).toBe(1);
    expect((await launcher.listManaged({ installation })).map((c) => c.project)).toEqual(['p2']);
    // CONTRACT_OWNER is no live process: recovery removes its pod.
    const recovered = await h.berth.runner.recover();
    expect(recovered.removed).toBe(1);
    expect(await launcher.listManaged({ installation })).toEqual([]);
    expect(await sandboxes()).toEqual([]);
  });

  it("renders objects the API server takes as they are: the published OpenAPI, the CRD's schema, nothing dropped", async () => {
    const doc = (await cluster.get('/openapi/v2')) as OpenApiDoc;
    // A namespace of the file's (on the real tier the cluster is shared, and what it runs there is removed with the file's).
    const renderNs = `${NS}-render`;
    // An empty value too: the test server once took "" in a custom resource for null (ensure-kube.sh).
    const base = contract.plan({ argv: ['true'] });
    const plan = { ...base, env: { ...base.env, EMPTY: '' } };
    const files = new Map([['/workspace/AGENTS.md', [{ path: '', data: Buffer.from(PROTECTED_TEXT), mode: 0o644 }]]]);
    const volumes = new Map([['/workspace', 'a'.repeat(32)]]);
    const objects = renderKubeRun({
      plan,
      name: 'berth-render-check',
      namespace: renderNs,
      files,
      pullPolicy: 'IfNotPresent',
      volumes,
    });
    const policy = renderNetworkPolicy({
      namespace: renderNs,
      installation: plan.labels[LABELS.installation] ?? '',
      gatewayPort: 41500,
      berthPodLabels: BERTH_POD_LABELS,
    });
    expect(checkAgainstOpenApi(doc, 'io.k8s.api.core.v1.PodSpec', objects.sandbox.spec.podTemplate.spec)).toEqual([]);
    expect(checkAgainstOpenApi(doc, 'io.k8s.api.core.v1.ConfigMap', objects.configMap)).toEqual([]);
    for (const claim of objects.claims) expect(checkAgainstOpenApi(doc, 'io.k8s.api.core.v1.PersistentVolumeClaim', claim)).toEqual([]);
    expect(checkAgainstOpenApi(doc, 'io.k8s.api.networking.v1.NetworkPolicy', policy)).toEqual([]);
    // The checker itself refuses what a 1.20 server would silently drop.
    expect(checkAgainstOpenApi(doc, 'io.k8s.api.core.v1.PodSpec', { ...objects.sandbox.spec.podTemplate.spec, hostUsers: false })).toEqual([
      'PodSpec.hostUsers: unknown field',
    ]);

    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: renderNs } } });
    const storedMap = await core.createNamespacedConfigMap({ namespace: renderNs, body: objects.configMap! });
    const storedClaim = await core.createNamespacedPersistentVolumeClaim({ namespace: renderNs, body: objects.claims[0]! });
    const storedPolicy = await cluster.kubeConfig
      .makeApiClient(NetworkingV1Api)
      .createNamespacedNetworkPolicy({ namespace: renderNs, body: policy });
    const storedSandbox = await custom().createNamespacedCustomObject({
      group: SANDBOX_API.group,
      version: SANDBOX_API.version,
      namespace: renderNs,
      plural: SANDBOX_API.plural,
      body: objects.sandbox,
    });
    expect(keptFields(objects.configMap, storedMap)).toEqual([]);
    expect(keptFields(objects.claims[0], storedClaim)).toEqual([]);
    expect(keptFields(policy, storedPolicy)).toEqual([]);
    // A CRD's schema prunes unknown fields silently: everything sent must be there.
    expect(keptFields(objects.sandbox, storedSandbox)).toEqual([]);
    // And the pod the controller makes of it is one the server accepts as a Pod (defaults added).
    const pod = await core.createNamespacedPod({
      namespace: renderNs,
      body: { metadata: { name: 'berth-render-check' }, spec: objects.sandbox.spec.podTemplate.spec },
    });
    expect(keptFields(objects.sandbox.spec.podTemplate.spec, pod.spec)).toEqual([]);
    expect(pod.spec?.containers[0]?.terminationMessagePolicy).toBe('File'); // defaulted by the server
    // No namespace controller runs here: what was made is removed one by one.
    await core.deleteNamespacedPod({ namespace: renderNs, name: 'berth-render-check', gracePeriodSeconds: 0 });
    // The real tier's controller-manager empties a deleted namespace (the real kubelet ran that pod).
    if (isRealKube()) await core.deleteNamespace({ name: renderNs });
  });
});
