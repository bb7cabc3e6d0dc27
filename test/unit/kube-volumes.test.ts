import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { renderKubeRun } from '../../src/launch/kubernetes/objects.js';
import {
  forgetRetired,
  readVolumeId,
  recordRetired,
  renewVolumeId,
  retiredVolumes,
  VOLUME_LABEL,
  VOLUME_MARKER,
  volumeIdOf,
  volumeIdsBelow,
} from '../../src/launch/kubernetes/volumes.js';
import { AGENT_HOME, WORKSPACE_MOUNT } from '../../src/plan/run-plan.js';
import { contractHome } from '../contract/contract-plan.js';

/**
 * What binds a cluster volume to the host directory berth made for it (outside-attack-4 M4): a
 * random id in the directory names the claim, so a directory made again (a session or project of
 * a deleted one's name) names another claim. The pure parts, without a cluster.
 */

const root = fs.mkdtempSync(join(os.tmpdir(), 'berth-volumes-'));
const home = contractHome({ image: 'berth/shell:latest', runtime: 'runc' });
afterAll(async () => {
  fs.rmSync(root, { recursive: true, force: true });
  await home.cleanup();
});

const dir = (name: string) => {
  const d = join(root, name);
  fs.mkdirSync(d, { recursive: true });
  return d;
};

describe('volume ids', () => {
  it('a directory keeps its id; the same path made again gets another', () => {
    const d = dir('home-support');
    expect(readVolumeId(d)).toBeUndefined();
    const id = volumeIdOf(d);
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(volumeIdOf(d)).toBe(id);
    expect(readVolumeId(d)).toBe(id);
    expect(fs.statSync(join(d, VOLUME_MARKER)).mode & 0o777).toBe(0o600);
    fs.rmSync(d, { recursive: true });
    expect(readVolumeId(d)).toBeUndefined();
    expect(volumeIdOf(dir('home-support'))).not.toBe(id);
  });

  it('a link or junk at the marker is never followed nor taken: replaced by an id of its own', () => {
    const d = dir('planted');
    const elsewhere = dir('elsewhere');
    const theirs = volumeIdOf(elsewhere);
    fs.symlinkSync(join(elsewhere, VOLUME_MARKER), join(d, VOLUME_MARKER));
    expect(readVolumeId(d)).toBeUndefined();
    const mine = volumeIdOf(d);
    expect(mine).not.toBe(theirs);
    expect(fs.lstatSync(join(d, VOLUME_MARKER)).isFile()).toBe(true);
    expect(readVolumeId(elsewhere)).toBe(theirs);
    const junk = dir('junk');
    fs.writeFileSync(join(junk, VOLUME_MARKER), 'not an id\n');
    expect(volumeIdOf(junk)).toMatch(/^[0-9a-f]{32}$/);
  });

  it('a snapshot restored binds the directory to a new volume: the old id is handed back to retire, a planted link is never followed', () => {
    const d = dir('restored');
    const before = volumeIdOf(d);
    const renewed = renewVolumeId(d);
    expect(renewed.old).toBe(before);
    expect(renewed.id).not.toBe(before);
    expect(readVolumeId(d)).toBe(renewed.id);
    expect(volumeIdOf(d)).toBe(renewed.id);
    const elsewhere = dir('elsewhere-2');
    const theirs = volumeIdOf(elsewhere);
    fs.rmSync(join(d, VOLUME_MARKER));
    fs.symlinkSync(join(elsewhere, VOLUME_MARKER), join(d, VOLUME_MARKER));
    const again = renewVolumeId(d);
    expect(again.old).toBeUndefined();
    expect(fs.lstatSync(join(d, VOLUME_MARKER)).isFile()).toBe(true);
    expect(readVolumeId(elsewhere)).toBe(theirs);
  });

  it('the ids below a directory: its directories only, links not followed', () => {
    const parent = dir('workspaces');
    const a = volumeIdOf(dir('workspaces/a'));
    dir('workspaces/none');
    const other = volumeIdOf(dir('outside'));
    fs.symlinkSync(join(root, 'outside'), join(parent, 'link'));
    expect(volumeIdsBelow(parent)).toEqual([a]);
    expect(volumeIdsBelow(parent)).not.toContain(other);
    expect(volumeIdsBelow(join(root, 'missing'))).toEqual([]);
  });

  it('the retired list: ids only, bounded, forgotten once gone', () => {
    const state = dir('state');
    const ids = [volumeIdOf(dir('r1')), volumeIdOf(dir('r2'))];
    expect(recordRetired(state, [...ids, '../etc/passwd', 'x'])).toBe(2);
    expect(retiredVolumes(state, 1)).toEqual({ ids: [expect.stringMatching(/^[0-9a-f]{32}$/)], waiting: 2 });
    forgetRetired(state, [ids[0]!, '../../x']);
    expect(retiredVolumes(state, 10)).toEqual({ ids: [ids[1]], waiting: 1 });
  });
});

describe('claims bound to their volume ids', () => {
  const render = (volumes: Map<string, string>) => {
    const plan = home.plan({ argv: ['true'], tenant: 'a' });
    const withHome = {
      ...plan,
      mounts: [...plan.mounts, { type: 'bind' as const, source: dir('h'), target: AGENT_HOME, readOnly: false }],
      labels: { ...plan.labels, 'berth.session': 'support' },
    };
    return renderKubeRun({
      plan: withHome,
      name: 'berth-r1',
      namespace: 'berth',
      files: new Map([['/workspace/AGENTS.md', [{ path: '', data: Buffer.from('x'), mode: 0o644 }]]]),
      pullPolicy: 'IfNotPresent',
      volumes,
    });
  };

  it('another volume id (the directory made again) is another claim, labelled with its id', () => {
    const ids = (ws: string, h: string) =>
      new Map([
        [WORKSPACE_MOUNT, ws],
        [AGENT_HOME, h],
      ]);
    const first = render(ids('1'.repeat(32), '2'.repeat(32))).claims;
    const again = render(ids('1'.repeat(32), '2'.repeat(32))).claims;
    const homeMadeAgain = render(ids('1'.repeat(32), '3'.repeat(32))).claims;
    expect(again.map((c) => c.metadata?.name)).toEqual(first.map((c) => c.metadata?.name));
    expect(homeMadeAgain[0]?.metadata?.name).toBe(first[0]?.metadata?.name);
    expect(homeMadeAgain[1]?.metadata?.name).not.toBe(first[1]?.metadata?.name);
    expect(first.map((c) => c.metadata?.labels?.[VOLUME_LABEL])).toEqual(['1'.repeat(32), '2'.repeat(32)]);
  });

  it('a persistent mount without a volume id is refused, never named by its owner alone', () => {
    expect(() => render(new Map([[WORKSPACE_MOUNT, '1'.repeat(32)]]))).toThrow(/no volume id for \/home\/agent/);
  });
});
