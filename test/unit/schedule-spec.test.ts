import { describe, expect, it } from 'vitest';
import { describeSpec, nextRun, readAt, readEvery, shortestGapSeconds } from '../../src/plan/schedule-spec.js';
import { checkZone, instantOf, shortTime } from '../../src/plan/time-zone.js';
import { isBerthError } from '../../src/base/errors.js';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
const words = (s: string) => s.split(' ');

describe('schedule specs: /every', () => {
  it('reads intervals, day sets, times and a trailing zone, and says how many words it took', () => {
    expect(readEvery(words('2h check the build'), 'UTC')).toEqual({ spec: { kind: 'interval', seconds: 7200 }, zone: 'UTC', used: 1 });
    expect(readEvery(words('30 minutes ping'), 'UTC')).toEqual({ spec: { kind: 'interval', seconds: 1800 }, zone: 'UTC', used: 2 });
    expect(readEvery(words('hour ping'), 'UTC').spec).toEqual({ kind: 'interval', seconds: 3600 });
    expect(readEvery(words('weekday at 9:00 Europe/Berlin check mail'), 'UTC')).toEqual({
      spec: { kind: 'weekly', days: [1, 2, 3, 4, 5], time: '09:00' },
      zone: 'Europe/Berlin',
      used: 4,
    });
    expect(readEvery(words('mon,wed,fri 18:30 x'), 'Asia/Tokyo')).toEqual({
      spec: { kind: 'weekly', days: [1, 3, 5], time: '18:30' },
      zone: 'Asia/Tokyo',
      used: 2,
    });
    expect(readEvery(words('mon, fri at 07:05 x'), 'UTC')).toEqual({
      spec: { kind: 'weekly', days: [1, 5], time: '07:05' },
      zone: 'UTC',
      used: 4,
    });
    expect(readEvery(words('08:15 x'), 'UTC')).toEqual({
      spec: { kind: 'weekly', days: [0, 1, 2, 3, 4, 5, 6], time: '08:15' },
      zone: 'UTC',
      used: 1,
    });
  });

  it('refuses what it cannot read, naming the field and what to say instead', () => {
    for (const bad of ['soon do it', 'day do it', 'weekday at 25:00 x', '0s x', '400d x']) {
      try {
        readEvery(words(bad), 'UTC');
        expect.fail(`"${bad}" was read`);
      } catch (err) {
        expect(isBerthError(err, 'CONFIG_INVALID')).toBe(true);
        expect((err as { details: { issues: Array<{ field: string }> } }).details.issues[0]?.field).toBe('every');
      }
    }
  });

  it('says it in plain words', () => {
    expect(describeSpec({ kind: 'weekly', days: [1, 2, 3, 4, 5], time: '09:00' }, 'Europe/Berlin')).toBe(
      'every weekday at 09:00 Europe/Berlin',
    );
    expect(describeSpec({ kind: 'weekly', days: [1, 3], time: '09:00' }, 'UTC')).toBe('every Mon and Wed at 09:00 UTC');
    expect(describeSpec({ kind: 'interval', seconds: 7200 }, 'UTC')).toBe('every 2 hours');
    expect(describeSpec({ kind: 'interval', seconds: 60 }, 'UTC')).toBe('every minute');
  });
});

describe('schedule specs: the next run', () => {
  it('a weekday schedule made on a Friday morning runs on Monday: "next run Mon 30 Nov 09:00"', () => {
    const now = at('2026-11-27T09:00:00Z'); // Fri 10:00 in Berlin
    const next = nextRun({ kind: 'weekly', days: [1, 2, 3, 4, 5], time: '09:00' }, 'Europe/Berlin', now, now);
    expect(iso(next)).toBe('2026-11-30T08:00:00.000Z');
    expect(shortTime(next as number, 'Europe/Berlin')).toBe('Mon 30 Nov 09:00');
  });

  it('a time in the spring-forward gap runs once, right after the gap; the next day at its time again', () => {
    const spec = { kind: 'weekly' as const, days: [0, 1, 2, 3, 4, 5, 6], time: '02:30' };
    const first = nextRun(spec, 'Europe/Berlin', at('2026-03-28T12:00:00Z'), 0);
    expect(iso(first)).toBe('2026-03-29T01:30:00.000Z'); // 03:30 CEST: 02:30 does not exist that night
    expect(iso(nextRun(spec, 'Europe/Berlin', first as number, 0))).toBe('2026-03-30T00:30:00.000Z');
    // New York springs forward on 8 March 2026
    expect(iso(nextRun(spec, 'America/New_York', at('2026-03-07T12:00:00Z'), 0))).toBe('2026-03-08T07:30:00.000Z');
  });

  it('a time that happens twice when the clocks go back runs once, at the first', () => {
    const spec = { kind: 'weekly' as const, days: [0, 1, 2, 3, 4, 5, 6], time: '02:30' };
    const first = nextRun(spec, 'Europe/Berlin', at('2026-10-24T12:00:00Z'), 0);
    expect(iso(first)).toBe('2026-10-25T00:30:00.000Z'); // 02:30 CEST
    // Not the second 02:30 (01:30Z, CET) an hour later: the next day's.
    expect(iso(nextRun(spec, 'Europe/Berlin', first as number, 0))).toBe('2026-10-26T01:30:00.000Z');
  });

  it('09:00 stays 09:00 on the wall clock across a DST change; an interval stays exact', () => {
    const spec = { kind: 'weekly' as const, days: [0, 1, 2, 3, 4, 5, 6], time: '09:00' };
    expect(iso(nextRun(spec, 'Europe/Berlin', at('2026-10-24T08:00:00Z'), 0))).toBe('2026-10-25T08:00:00.000Z');
    expect(iso(nextRun(spec, 'Europe/Berlin', at('2026-10-23T08:00:00Z'), 0))).toBe('2026-10-24T07:00:00.000Z');
    const anchor = at('2026-10-24T23:00:00Z');
    expect(iso(nextRun({ kind: 'interval', seconds: 3600 }, 'Europe/Berlin', at('2026-10-25T01:10:00Z'), anchor))).toBe(
      '2026-10-25T02:00:00.000Z',
    );
    // A berth that was down for hours: the next one after now, not each one it missed.
    expect(iso(nextRun({ kind: 'interval', seconds: 3600 }, 'UTC', anchor + 5.5 * 3600_000, anchor))).toBe(iso(anchor + 6 * 3600_000));
  });

  it('a once schedule has no run after its time', () => {
    expect(nextRun({ kind: 'once', at: '2026-12-01T00:00:00.000Z' }, 'UTC', at('2026-12-01T00:00:00Z'), 0)).toBeUndefined();
  });

  it('the shortest gap between runs, for the minimum interval bound', () => {
    expect(shortestGapSeconds({ kind: 'interval', seconds: 30 })).toBe(30);
    expect(shortestGapSeconds({ kind: 'once', at: '2026-12-01T00:00:00.000Z' })).toBeUndefined();
  });
});

describe('schedule specs: /at', () => {
  const now = at('2026-11-27T21:30:00Z'); // Fri 22:30 Berlin

  it('reads a time from now, a time of day (today, else tomorrow), a day, a date, an ISO time', () => {
    expect(readAt(words('+2s hi'), 'UTC', now)).toEqual({ spec: { kind: 'once', at: '2026-11-27T21:30:02.000Z' }, zone: 'UTC', used: 1 });
    expect(iso(Date.parse((readAt(words('+2h x'), 'UTC', now).spec as { at: string }).at))).toBe('2026-11-27T23:30:00.000Z');
    expect(readAt(words('23:00 x'), 'Europe/Berlin', now).spec).toEqual({ kind: 'once', at: '2026-11-27T22:00:00.000Z' });
    expect(readAt(words('09:00 x'), 'Europe/Berlin', now).spec).toEqual({ kind: 'once', at: '2026-11-28T08:00:00.000Z' });
    expect(readAt(words('tomorrow at 09:00 America/New_York x'), 'Europe/Berlin', now)).toEqual({
      spec: { kind: 'once', at: '2026-11-28T14:00:00.000Z' },
      zone: 'America/New_York',
      used: 4,
    });
    expect(readAt(words('mon 09:00 x'), 'Europe/Berlin', now).spec).toEqual({ kind: 'once', at: '2026-11-30T08:00:00.000Z' });
    expect(readAt(words('2026-12-24 18:00 x'), 'Europe/Berlin', now)).toEqual({
      spec: { kind: 'once', at: '2026-12-24T17:00:00.000Z' },
      zone: 'Europe/Berlin',
      used: 2,
    });
    expect(readAt(words('2026-12-24T18:00:00+01:00'), 'UTC', now).spec).toEqual({ kind: 'once', at: '2026-12-24T17:00:00.000Z' });
  });

  it('refuses a time that has passed, a date that does not exist, and nonsense', () => {
    for (const bad of ['2026-01-01 10:00', '2026-02-30 10:00', 'later', '+5y', 'today 08:00']) {
      expect(() => readAt(words(bad), 'Europe/Berlin', now)).toThrow(/not a time berth understands/);
    }
  });
});

describe('time zones', () => {
  it('takes IANA names, refuses others with the field at fault', () => {
    expect(checkZone('Europe/Berlin')).toBe('Europe/Berlin');
    expect(checkZone('UTC')).toBe('UTC');
    for (const bad of ['Mars/Olympus', '+01:00', 'Europe/../etc', '']) expect(() => checkZone(bad)).toThrow(/not a time zone/);
  });

  it('a local time in the gap moves on by the gap; a repeated one is the earlier', () => {
    expect(iso(instantOf({ year: 2026, month: 3, day: 29, hour: 2, minute: 30 }, 'Europe/Berlin'))).toBe('2026-03-29T01:30:00.000Z');
    expect(iso(instantOf({ year: 2026, month: 10, day: 25, hour: 2, minute: 30 }, 'Europe/Berlin'))).toBe('2026-10-25T00:30:00.000Z');
  });
});
