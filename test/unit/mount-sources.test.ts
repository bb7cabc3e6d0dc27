import { describe, expect, it } from 'vitest';
import { wrongSources } from '../../src/launch/mount-check.js';

/**
 * The warm check's view of a bind's source (launch/mount-check.ts wrongSources): what a container
 * shows at each target must be the planned source, by device and path within it, as the host's
 * own mount table places that source. Tables as the kernel writes them (fields 3, 4 and 5 matter).
 */
const line = (id: number, device: string, root: string, point: string) => `${id} 1 ${device} ${root} ${point} rw,relatime - ext4 /dev/x rw`;
const host = [
  line(20, '254:1', '/', '/'),
  line(30, '254:1', '/srv/data', '/work'),
  line(40, '7:3', '/', '/home/b/projects/p/workspaces/w1'),
].join('\n');
const devices: Record<string, string> = {
  '/home/b/projects/p/workspaces/w0': '254:1',
  '/work/homes/s1': '254:1',
  '/home/b/projects/p/workspaces/w1': '7:3',
  '/home/b/rules.md': '254:1',
};
const deviceOf = (source: string) => devices[source];

describe('a bind target shows its planned source, or the container is not kept', () => {
  it('the sources berth planned, below / and below another mount of the same disk, and a loop filesystem of its own: none wrong', () => {
    const container = [
      line(100, '0:50', '/', '/'),
      line(101, '254:1', '/home/b/projects/p/workspaces/w0', '/workspace'),
      line(102, '254:1', '/srv/data/homes/s1', '/home/agent'),
      line(103, '7:3', '/', '/mnt/loop'),
      line(104, '254:1', '/home/b/rules.md', '/workspace/RULES.md'),
    ].join('\n');
    const binds = [
      { target: '/workspace', source: '/home/b/projects/p/workspaces/w0' },
      { target: '/home/agent', source: '/work/homes/s1' },
      { target: '/mnt/loop', source: '/home/b/projects/p/workspaces/w1' },
      { target: '/workspace/RULES.md', source: '/home/b/rules.md' },
    ];
    expect(wrongSources(binds, container, host, deviceOf)).toEqual([]);
  });

  it("another tenant's workspace at /workspace, an empty filesystem over the home, a missing file mount: each named", () => {
    const container = [
      line(100, '0:50', '/', '/'),
      line(101, '254:1', '/home/b/projects/p/workspaces/OTHER', '/workspace'),
      line(102, '254:1', '/srv/data/homes/s1', '/home/agent'),
      line(105, '0:77', '/', '/home/agent'), // mounted on top: the top one counts
    ].join('\n');
    const binds = [
      { target: '/workspace', source: '/home/b/projects/p/workspaces/w0' },
      { target: '/home/agent', source: '/work/homes/s1' },
      { target: '/workspace/RULES.md', source: '/home/b/rules.md' },
    ];
    expect(wrongSources(binds, container, host, deviceOf)).toEqual(['/workspace', '/home/agent', '/workspace/RULES.md']);
  });

  it('of two host mounts at one point, the later (on top) places the source; a source whose device cannot be read is not judged', () => {
    const stacked = [host, line(50, '254:1', '/srv/other', '/work')].join('\n');
    const container = [line(102, '254:1', '/srv/other/homes/s1', '/home/agent')].join('\n');
    expect(wrongSources([{ target: '/home/agent', source: '/work/homes/s1' }], container, stacked, deviceOf)).toEqual([]);
    expect(wrongSources([{ target: '/x', source: '/nowhere' }], container, stacked, deviceOf)).toEqual([]);
  });
});
