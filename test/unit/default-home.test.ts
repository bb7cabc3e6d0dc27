import { describe, expect, it } from 'vitest';
import { defaultHome } from '../../src/config/home.js';

describe('the default home (no --home, no BERTH_HOME)', () => {
  it('is outside the checkout: $XDG_DATA_HOME/berth, else ~/.local/share/berth; the current directory only if it already is a home', () => {
    const none = () => false;
    expect(defaultHome({ HOME: '/home/ann' }, '/src/berth', none)).toBe('/home/ann/.local/share/berth');
    expect(defaultHome({ HOME: '/home/ann', XDG_DATA_HOME: '/data' }, '/src/berth', none)).toBe('/data/berth');
    // A relative XDG_DATA_HOME is not a place (the XDG spec says to ignore it).
    expect(defaultHome({ HOME: '/home/ann', XDG_DATA_HOME: 'rel' }, '/src/berth', none)).toBe('/home/ann/.local/share/berth');
    expect(defaultHome({ HOME: '/home/ann' }, '/srv/old-home', (d) => d === '/srv/old-home')).toBe('/srv/old-home');
  });
});
