// The fleet overview's tiles, painted: one host's shapes (its frame, a bar per GPU, its memory),
// filled by colour, and at small zooms kept as cached bitmaps, so a view of a thousand tiles costs
// a few image draws instead of some 20,000 rectangles rasterised anew each frame.
//
// paintTile adds a tile's rectangles to one path per colour (fillTiles fills them: one path per
// colour per picture). Up to one device pixel per world unit (a screen of many tiles), the
// overview is drawn from blocks of BLOCK x BLOCK tiles, each a canvas of its own at a power-of-two
// scale at least the view's (so it is drawn shrunk by at most half), with the tiles' text where
// the view's scale makes it legible; a block is made when first seen and kept. Each frame a
// block's tiles are compared with the hosts' tiles now (a host that changed is a new tile object,
// fleet_stream.js), and only the changed ones are painted again, at most PAINT_PER_FRAME's worth
// a frame (the rest follow in the next frames, which it asks for), so a delta of hundreds of hosts
// is spread over a few frames, not one; a block not yet made when the frame's budget is spent is
// drawn from the same tiles' block at another scale, when one is kept, until it is made. Blocks
// without text are made at most at PLAIN_LEVEL_MAX. While the view
// zooms, blocks are drawn nearest-neighbour (a smoothed shrink costs about five times as much in
// software); a still view is drawn smoothed. At most MAX_BLOCK_PIXELS are kept; the blocks drawn
// longest ago go first.
//
// Constraints: no DOM but the blocks' own canvases; the same shapes, colours and text as drawing
// the tiles directly (fleet.js draws them so above one device pixel per world unit).

import { COL, F, NOT_SAMPLED, dpr, fit, markDirty } from './canvas.js';
import { fmtBytes } from './format.js';

export const TILE_W = 220, TILE_H = 92, GAP = 12;
export const BAR_Y = 44, BAR_H = 26, MEM_Y = 76;
const STEP_X = TILE_W + GAP, STEP_Y = TILE_H + GAP;
export const BLOCK = 4;
// what painting blocks may do in a frame (the rest follows in the next frames), in tiles with text
// at one device pixel per world unit: a tile at scale L costs L^2 of one (its pixels), half that
// without text, and at least an eighth (its shapes' own cost). Counted, not timed: the blocks are
// rasterised when drawn, after the painting
const PAINT_PER_FRAME = 12;
// at most this many pixels of blocks are kept (4 bytes each)
const MAX_BLOCK_PIXELS = 32e6;
// text-less blocks are made at most at this scale (drawn enlarged up to 1.45x above it: flat
// rectangles, and no text to blur), so that only the legible view keeps blocks at full scale
const PLAIN_LEVEL_MAX = 0.5;
// the largest device pixels per world unit drawn from blocks (above it, a screen holds few tiles,
// drawn directly)
export const BLOCKS_UP_TO = 1;

const FILLS = [['bg', COL.node], ['barbg', COL.barBg], ['null', NOT_SAMPLED], ['sm', COL.sm], ['mem', COL.mem], ['lost', COL.lost]];
const EDGES = [['up', COL.border, 1], ['stale', COL.warn, 2], ['down', COL.err, 2]];

// a tile's shapes at (x, y) into the paths `P(key)` gives; returns its GPUs' memory [used, total]
export function paintTile(P, t, x, y) {
  const live = t.state === 'up', dim = live ? '' : ':dim';
  P('bg').rect(x, y, TILE_W, TILE_H);
  P('edge:' + t.state).rect(x + 0.5, y + 0.5, TILE_W - 1, TILE_H - 1);
  const gpus = t.gpus || [], w = gpus.length ? (TILE_W - 20) / gpus.length : 0;
  let used = 0, total = 0;
  for (let g = 0; g < gpus.length; g++) {
    const [, util, mem, memTotal, lost] = gpus[g];
    const gx = x + 10 + g * w, bw = Math.max(1, w - 2);
    P('barbg').rect(gx, y + BAR_Y, bw, BAR_H);
    if (lost) P('lost' + dim).rect(gx, y + BAR_Y, bw, BAR_H);
    else if (typeof util !== 'number') P('null').rect(gx, y + BAR_Y, bw, BAR_H);
    else { const h = BAR_H * Math.max(0, Math.min(1, util / 100)); P('sm' + dim).rect(gx, y + BAR_Y + BAR_H - h, bw, h); }
    if (typeof mem === 'number' && typeof memTotal === 'number') { used += mem; total += memTotal; }
  }
  P('barbg').rect(x + 10, y + MEM_Y, TILE_W - 20, 6);
  if (total > 0) P('mem' + dim).rect(x + 10, y + MEM_Y, (TILE_W - 20) * Math.min(1, used / total), 6);
  return [used, total];
}

// a tile's two lines: its name, and its state, GPUs, processes and memory
export function tileLines(t, used, total) {
  const gpus = t.gpus || [];
  return [t.name, (t.state === 'up' ? '' : t.state.toUpperCase() + ' · ') + gpus.length + ' GPU' + (gpus.length === 1 ? '' : 's') +
    ' · ' + t.process_count + ' proc' + (t.traced_running ? ' · ' + t.traced_running + ' traced' : '') +
    (total > 0 ? ' · ' + fmtBytes(used) + ' / ' + fmtBytes(total) : '')];
}
export function lineColour(t) { return t.state === 'up' ? COL.dim : t.state === 'stale' ? COL.warn : COL.err; }

// paths by key, made on first use
export function pathSet() {
  const paths = new Map();
  return { paths, P: (k) => { let p = paths.get(k); if (!p) { p = new Path2D(); paths.set(k, p); } return p; } };
}

// the paths filled and stroked on `c`, whose world unit is `cssPerWorld` CSS pixels (the edges
// are 1 or 2 CSS pixels wide)
export function fillTiles(c, paths, cssPerWorld) {
  for (const [k, color] of FILLS) {
    for (const [suffix, alpha] of [['', 1], [':dim', 0.35]]) {
      const p = paths.get(k + suffix);
      if (p) { c.globalAlpha = alpha; c.fillStyle = color; c.fill(p); }
    }
  }
  c.globalAlpha = 1;
  for (const [state, color, width] of EDGES) {
    const p = paths.get('edge:' + state);
    if (p) { c.strokeStyle = color; c.lineWidth = width / cssPerWorld; c.stroke(p); }
  }
}

export function tileXY(i, cols) { return [(i % cols) * STEP_X, Math.floor(i / cols) * STEP_Y]; }

// whether the view's scale `s` is drawn from blocks
export function useBlocks(s) { return s * dpr <= BLOCKS_UP_TO; }

const blocks = new Map();   // 'level:bc:br' -> {canvas, c, level, bc, br, slots, used}
let blockPixels = 0, layoutKey = '', frameNo = 0, lastScale = 0;

// Draws the tiles of `order` (names; `tiles` by name, `cols` a row) that the world rectangle
// [vx0, vx1] x [vy0, vy1] shows, from blocks, onto `ctx` (in world coordinates at scale `s`),
// with their text when `withText`; returns the names of the tiles in view. `key` names the
// layout: a new one drops every block.
export function drawBlocks(ctx, order, tiles, cols, key, s, withText, vx0, vy0, vx1, vy1) {
  if (key !== layoutKey) { blocks.clear(); blockPixels = 0; layoutKey = key; }
  frameNo++;
  const level = Math.min(2 ** Math.ceil(Math.log2(Math.max(1 / 1024, s * dpr))), withText ? Infinity : PLAIN_LEVEL_MAX);
  const tileCost = Math.max(1 / 8, level * level * (withText ? 1 : 0.5));
  const rows = Math.ceil(order.length / cols);
  const c0 = Math.max(0, Math.floor(vx0 / STEP_X)), c1 = Math.min(cols - 1, Math.floor(vx1 / STEP_X));
  const r0 = Math.max(0, Math.floor(vy0 / STEP_Y)), r1 = Math.min(rows - 1, Math.floor(vy1 / STEP_Y));
  const shown = [];
  for (let r = r0; r <= r1; r++) {
    for (let c = c0; c <= c1; c++) { const name = order[r * cols + c]; if (name !== undefined) shown.push(name); }
  }
  let budget = PAINT_PER_FRAME, behind = false;
  const still = s === lastScale;
  lastScale = s;
  ctx.imageSmoothingEnabled = still;
  for (let br = Math.floor(r0 / BLOCK); br <= Math.floor(r1 / BLOCK); br++) {
    for (let bc = Math.floor(c0 / BLOCK); bc <= Math.floor(c1 / BLOCK); bc++) {
      const id = blockId(level, withText, bc, br);
      if (!blocks.has(id) && budget < tileCost * BLOCK * BLOCK) {   // a new block past the budget: another
        const other = standIn(level, bc, br);                   // scale's meanwhile, when one is kept
        if (other) { other.used = frameNo; drawBlock(ctx, other, bc, br); behind = true; continue; }
      }
      const b = block(id, level);
      const fresh = b.used === 0;
      b.used = frameNo;
      const { paths, P } = pathSet(), lines = [];
      b.c.setTransform(level, 0, 0, level, (GAP / 2 - bc * BLOCK * STEP_X) * level, (GAP / 2 - br * BLOCK * STEP_Y) * level);
      for (let j = 0; j < BLOCK * BLOCK; j++) {
        const c = bc * BLOCK + (j % BLOCK), r = br * BLOCK + Math.floor(j / BLOCK);
        const name = c < cols ? order[r * cols + c] : undefined, t = name === undefined ? null : tiles.get(name) || null;
        if (b.slots[j] === t) continue;
        if (!fresh && budget < tileCost) { behind = true; continue; }
        budget -= tileCost;
        const x = c * STEP_X, y = r * STEP_Y;
        b.c.clearRect(x - GAP / 2, y - GAP / 2, STEP_X, STEP_Y);
        if (t) { const [used, total] = paintTile(P, t, x, y); if (withText) lines.push([t, x, y, used, total]); }
        b.slots[j] = t;
      }
      if (paths.size) fillTiles(b.c, paths, level / dpr);
      for (const [t, x, y, used, total] of lines) {   // drawn at the block's scale: no font at another size
        const [name, what] = tileLines(t, used, total);
        b.c.font = F.bold.css; b.c.fillStyle = COL.text;
        b.c.fillText(fit(name, TILE_W - 20, F.bold), x + 10, y + 18);
        b.c.font = F.small.css; b.c.fillStyle = lineColour(t);
        b.c.fillText(fit(what, TILE_W - 20, F.small), x + 10, y + 35);
      }
      drawBlock(ctx, b, bc, br);
    }
  }
  ctx.imageSmoothingEnabled = true;
  evict();
  if (behind || !still) markDirty();   // the tiles past this frame's time, and a still view smoothed
  return shown;
}

function drawBlock(ctx, b, bc, br) {
  ctx.drawImage(b.canvas, bc * BLOCK * STEP_X - GAP / 2, br * BLOCK * STEP_Y - GAP / 2, b.canvas.width / b.level,
    b.canvas.height / b.level);
}
function blockId(level, withText, bc, br) { return level + (withText ? 't:' : ':') + bc + ':' + br; }
// a kept block of the same tiles at another scale, the nearest first
function standIn(level, bc, br) {
  for (const k of [0, -1, 1, -2, 2, -3, -4, -5, -6]) {
    for (const withText of [false, true]) {
      const b = blocks.get(blockId(level * 2 ** k, withText, bc, br));
      if (b) return b;
    }
  }
  return null;
}
function block(id, level) {
  let b = blocks.get(id);
  if (b) return b;
  const canvas = document.createElement('canvas');
  canvas.width = Math.ceil(BLOCK * STEP_X * level);
  canvas.height = Math.ceil(BLOCK * STEP_Y * level);
  const c = canvas.getContext('2d');
  b = { canvas, c, level, slots: new Array(BLOCK * BLOCK).fill(null), used: 0 };
  blocks.set(id, b);
  blockPixels += canvas.width * canvas.height;
  return b;
}

// the blocks drawn longest ago, until at most MAX_BLOCK_PIXELS are kept (never this frame's)
function evict() {
  if (blockPixels <= MAX_BLOCK_PIXELS) return;
  const old = [...blocks].filter(([, b]) => b.used !== frameNo).sort((a, b) => a[1].used - b[1].used);
  for (const [id, b] of old) {
    if (blockPixels <= MAX_BLOCK_PIXELS) break;
    blocks.delete(id);
    blockPixels -= b.canvas.width * b.canvas.height;
    b.canvas.width = b.canvas.height = 0;
  }
}

// for the test hook: the blocks kept and their pixels
export function blockStats() { return { blocks: blocks.size, pixels: blockPixels }; }
