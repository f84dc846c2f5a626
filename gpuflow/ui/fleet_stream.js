// The fleet's overview stream (api/stream?detail=hosts, docs/snapshot.md "The fleet's overview"):
// the page's reader of it.
//
// A full frame lists every host's tile; a delta only the tiles that changed since its base frame,
// and the names of the hosts gone. read() gives every tile by name, as
// gpuflow.transport.hosts_view.HostsReader does in Python.
//
// Constraints: pure (no DOM, no I/O); read() returns a new state and never changes the one it was
// given, so a frame that cannot be read changes nothing (it throws: the caller starts over).

export const HOSTS_DETAIL = 'hosts';

// the state before the first frame
export const nothingSeen = Object.freeze({ seq: null, host: null, tiles: new Map() });

// whether `f` (parsed JSON) is a frame of the overview stream
export function isHostsFrame(f) { return !!f && typeof f === 'object' && f.detail === HOSTS_DETAIL; }

// The state after frame `f`: { seq, host (the serving agent's), tiles (name -> tile) }.
export function readHosts(state, f) {
  if (!isHostsFrame(f) || !Array.isArray(f.hosts)) throw new Error('not a frame of the hosts view');
  const delta = f.frame === 'delta';
  if (delta && (state.seq === null || f.base_seq !== state.seq)) {
    throw new Error('delta on base ' + f.base_seq + ', last frame read ' + state.seq);
  }
  const tiles = delta ? new Map(state.tiles) : new Map();
  if (delta) for (const name of f.hosts_gone || []) tiles.delete(name);
  for (const t of f.hosts) if (t && typeof t.name === 'string') tiles.set(t.name, t);
  return { seq: f.seq, host: f.host || state.host, tiles };
}
