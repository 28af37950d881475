#include <fmt/core.h>

#include <unordered_map>

#include "export.hpp"

namespace ordo::tracefile {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  return out;
}

std::string ms(std::int64_t ns) { return fmt::format("{:.3f}", double(ns) / 1e6); }
std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

std::string tables(const Summary& s, const Trace& t) {
  std::string h;
  h += fmt::format("<p>{} rank(s), {} iteration(s), window {} ms, {} task instances. Critical "
                   "path: {} ms of compute in {} instances.</p>\n",
                   s.ranks, s.iterations, ms(s.span_ns), s.instances.size(), ms(s.critical_ns),
                   s.critical_path.size());
  h += "<h2>Workers</h2>\n<table><tr><th>rank</th><th>worker</th><th>instances</th><th>busy "
       "ms</th><th>idle ms</th><th>other ms</th><th>utilisation</th><th>steals</th>"
       "<th>flushes</th></tr>\n";
  for (const WorkerRow& w : s.workers)
    h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                     "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     w.rank, w.worker, w.instances, ms(w.busy_ns), ms(w.idle_ns),
                     ms(std::max<std::int64_t>(0, w.span_ns - w.busy_ns - w.idle_ns)),
                     pct(w.utilisation()), w.steals, w.flushes);
  h += "</table>\n<h2>Tasks</h2>\n<table><tr><th>task</th><th>instances</th><th>compute "
       "ms</th><th>lock-wait ms</th><th>compute %</th></tr>\n";
  for (const TaskRow& tr : s.tasks)
    h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     escape(tr.name), tr.instances, ms(tr.compute_ns), ms(tr.wait_ns),
                     pct(tr.compute_share()));
  h += "</table>\n<h2>Locations</h2>\n<table><tr><th>location</th><th>grants</th><th>wait "
       "ms</th><th>bytes sent</th><th>minimum bytes</th></tr>\n";
  for (const LocationRow& l : s.locations)
    h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     escape(l.name), l.grants, ms(l.wait_ns), l.bytes, l.min_bytes);
  h += "</table>\n<h2>Peers</h2>\n<table><tr><th>from</th><th>to</th><th>bytes</th>"
       "<th>messages</th><th>minimum bytes</th></tr>\n";
  for (const PeerRow& p : s.peers)
    h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     p.from, p.to, p.bytes, p.messages, p.min_bytes);
  h += "</table>\n";
  (void)t;
  return h;
}

// The viewer. Rows are drawn on one canvas; each row also gets a positioned label element
// (div.timeline-row) so tests and users can find rows in the DOM. The stripe at the left of
// each row has the fixed colour rgb(255,0,200), which the screenshot test counts.
constexpr const char* kScript = R"JS(
(function () {
  'use strict';
  const D = JSON.parse(document.getElementById('trace-data').textContent);
  const ROW = 30, AXIS = 24, GUTTER = 120;
  const wrap = document.getElementById('timeline');
  const canvas = document.getElementById('canvas');
  const tip = document.getElementById('tip');
  const ctx = canvas.getContext('2d');
  let t0 = 0, t1 = Math.max(1, D.span);
  const show = { grants: true, messages: true, waits: true };
  function colour(i) {
    const h = (i * 137.508) % 360;
    return 'hsl(' + h.toFixed(0) + ',55%,58%)';
  }
  function width() { return wrap.clientWidth; }
  function x(t) { return GUTTER + (t - t0) / (t1 - t0) * (width() - GUTTER - 4); }
  function rowY(r) { return AXIS + r * ROW; }
  function size() {
    canvas.width = width();
    canvas.height = AXIS + D.rows.length * ROW + 4;
  }
  function labels() {
    D.rows.forEach(function (r, i) {
      const el = document.createElement('div');
      el.className = 'timeline-row';
      el.dataset.rank = r.rank;
      el.dataset.worker = r.worker;
      el.style.top = (rowY(i) + 6) + 'px';
      el.textContent = r.label;
      wrap.appendChild(el);
    });
  }
  function arrow(xa, ya, xb, yb, style) {
    ctx.strokeStyle = style; ctx.fillStyle = style;
    ctx.beginPath(); ctx.moveTo(xa, ya); ctx.lineTo(xb, yb); ctx.stroke();
    const a = Math.atan2(yb - ya, xb - xa);
    ctx.beginPath(); ctx.moveTo(xb, yb);
    ctx.lineTo(xb - 7 * Math.cos(a - 0.4), yb - 7 * Math.sin(a - 0.4));
    ctx.lineTo(xb - 7 * Math.cos(a + 0.4), yb - 7 * Math.sin(a + 0.4));
    ctx.closePath(); ctx.fill();
  }
  function draw() {
    size();
    const W = canvas.width;
    ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, W, canvas.height);
    // Axis: about ten ticks in round units.
    const span = t1 - t0, step = Math.pow(10, Math.floor(Math.log10(span / 10)));
    ctx.fillStyle = '#333'; ctx.font = '11px sans-serif';
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      const xx = x(t);
      ctx.fillRect(xx, AXIS - 6, 1, 6);
      ctx.fillText((t / 1e6).toFixed(step < 1e4 ? 3 : step < 1e5 ? 2 : 1) + ' ms', xx + 2, 12);
    }
    D.rows.forEach(function (r, i) {
      const y = rowY(i);
      ctx.fillStyle = i % 2 ? '#f4f4f4' : '#fafafa';
      ctx.fillRect(GUTTER, y, W - GUTTER, ROW - 2);
      ctx.fillStyle = 'rgb(255,0,200)';
      ctx.fillRect(2, y + 3, 6, ROW - 8);
    });
    ctx.save();
    ctx.beginPath(); ctx.rect(GUTTER, 0, W - GUTTER, canvas.height); ctx.clip();
    for (const s of D.slices) {  // [row, start, dur, type, name, iteration]
      if (s[1] > t1 || s[1] + s[2] < t0) continue;
      const xa = x(s[1]), w = Math.max(1, x(s[1] + s[2]) - xa), y = rowY(s[0]);
      ctx.fillStyle = s[3] === 0 ? colour(s[4]) : s[3] === 1 ? '#d0d0d0' : '#e02020';
      ctx.fillRect(xa, y + 4, w, ROW - 14);
      if (s[3] === 0 && w > 40) {
        ctx.fillStyle = '#000';
        ctx.fillText(D.names[s[4]] + ' #' + s[5], xa + 2, y + 18, w - 4);
      }
    }
    if (show.waits)
      for (const v of D.waits) {  // [row, start, end, location]
        if (v[1] > t1 || v[2] < t0) continue;
        ctx.fillStyle = 'rgba(255,140,0,0.8)';
        ctx.fillRect(x(v[1]), rowY(v[0]) + ROW - 9, Math.max(1, x(v[2]) - x(v[1])), 3);
      }
    ctx.lineWidth = 1;
    for (const a of D.arrows) {  // [rowA, tA, rowB, tB, type]
      if (a[4] === 0 && !show.grants) continue;
      if (a[4] === 1 && !show.messages) continue;
      if (Math.max(a[1], a[3]) < t0 || Math.min(a[1], a[3]) > t1) continue;
      arrow(x(a[1]), rowY(a[0]) + ROW / 2, x(a[3]), rowY(a[2]) + ROW / 2,
            a[4] === 0 ? 'rgba(30,60,200,0.55)' : 'rgba(0,0,0,0.9)');
    }
    ctx.restore();
  }
  function timeAt(px) { return t0 + (px - GUTTER) / (width() - GUTTER - 4) * (t1 - t0); }
  canvas.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect(), at = timeAt(ev.clientX - r.left);
    const f = ev.deltaY < 0 ? 0.8 : 1.25;
    t0 = at - (at - t0) * f; t1 = at + (t1 - at) * f;
    if (t1 - t0 < 100) t1 = t0 + 100;
    draw();
  }, { passive: false });
  let drag = null;
  canvas.addEventListener('mousedown', function (ev) { drag = { x: ev.clientX, t0: t0, t1: t1 }; });
  window.addEventListener('mouseup', function () { drag = null; });
  window.addEventListener('mousemove', function (ev) {
    const r = canvas.getBoundingClientRect();
    if (drag) {
      const dt = (ev.clientX - drag.x) / (width() - GUTTER - 4) * (drag.t1 - drag.t0);
      t0 = drag.t0 - dt; t1 = drag.t1 - dt; draw(); return;
    }
    const row = Math.floor((ev.clientY - r.top - AXIS) / ROW), t = timeAt(ev.clientX - r.left);
    let text = '';
    for (const s of D.slices)
      if (s[0] === row && s[1] <= t && t <= s[1] + s[2]) {
        text = (s[3] === 0 ? D.names[s[4]] + ' iteration ' + s[5] : s[3] === 1 ? 'idle' : 'trace flush') +
               ': ' + (s[2] / 1e3).toFixed(1) + ' us';
        break;
      }
    tip.textContent = text;
  });
  canvas.addEventListener('dblclick', function () { t0 = 0; t1 = Math.max(1, D.span); draw(); });
  for (const k of Object.keys(show)) {
    const box = document.getElementById('show-' + k);
    box.checked = show[k];
    box.addEventListener('change', function () { show[k] = box.checked; draw(); });
  }
  window.addEventListener('resize', draw);
  labels();
  draw();
  document.body.dataset.rows = String(D.rows.length);
  document.getElementById('status').textContent = 'rendered ' + D.rows.length + ' rows';
})();
)JS";

}  // namespace

std::string export_html(const Trace& t, const Summary& s) {
  using nlohmann::json;
  json d;
  d["span"] = 0;
  json rows = json::array(), names = json::array(), slices = json::array(),
       waits = json::array(), arrows = json::array();
  std::vector<std::uint32_t> row_base, name_base;
  std::int64_t end = 0;
  for (const RankTrace& r : t.ranks) {
    row_base.push_back(static_cast<std::uint32_t>(rows.size()));
    name_base.push_back(static_cast<std::uint32_t>(names.size()));
    for (std::uint32_t w = 0; w < r.workers; ++w)
      rows.push_back({{"rank", r.rank}, {"worker", w},
                      {"label", fmt::format("rank {} worker {}", r.rank, w)}});
    for (const TaskInfo& ti : r.tasks) names.push_back(ti.name);
    end = std::max(end, window(t, r).second);  // the runs, not the idle after them
  }
  d["span"] = end;
  struct Key {
    std::uint32_t rank, task;
    std::uint64_t it;
    bool operator==(const Key&) const = default;
  };
  struct Hash {
    std::size_t operator()(const Key& k) const {
      return std::hash<std::uint64_t>()(k.it * 1000003u ^ (std::uint64_t(k.task) << 20) ^ k.rank);
    }
  };
  std::unordered_map<Key, const InstanceRec*, Hash> inst;
  for (const InstanceRec& in : s.instances) {
    inst[{in.rank, in.task, in.iteration}] = &in;
    slices.push_back({row_base[in.rank] + in.worker, in.begin, in.end - in.begin, 0,
                      name_base[in.rank] + in.task, in.iteration});
  }
  for (const RankTrace& r : t.ranks) {
    std::vector<std::int64_t> parked(r.workers + 1, -1);
    for (const Event& e : r.events) {
      const std::int64_t at = t.aligned(r, e);
      const bool worker_row = e.worker < r.workers;
      if (e.k() == Kind::park) {
        parked[e.worker] = at;
      } else if (e.k() == Kind::unpark) {
        if (parked[e.worker] >= 0 && worker_row)
          slices.push_back({row_base[r.rank] + e.worker, parked[e.worker], at - parked[e.worker], 1, 0, 0});
        parked[e.worker] = -1;
      } else if (e.k() == Kind::flush && worker_row) {
        slices.push_back({row_base[r.rank] + e.worker, at, static_cast<std::int64_t>(e.arg1), 2, 0, 0});
      } else if (e.k() == Kind::grant) {
        auto to = inst.find({r.rank, e.task, e.arg0});
        if (to == inst.end()) continue;
        const InstanceRec& b = *to->second;
        const std::int64_t req = static_cast<std::int64_t>(e.arg1) + r.clock_offset_ns - t.origin;
        waits.push_back({row_base[r.rank] + b.worker, req, at, e.location});
        if (e.peer == kNone) continue;
        const std::uint64_t rel_iter = (e.flags & kPrevIteration) ? e.arg0 - 1 : e.arg0;
        auto from = inst.find({r.rank, e.peer, rel_iter});
        if (from == inst.end()) continue;
        arrows.push_back({row_base[r.rank] + from->second->worker, from->second->end,
                          row_base[r.rank] + b.worker, b.begin, 0});
      }
    }
  }
  for (const MessagePair& m : match_messages(t)) {
    const RankTrace& a = t.ranks[m.from];
    const RankTrace& b = t.ranks[m.to];
    const std::uint32_t wa = std::min<std::uint32_t>(m.send->worker, a.workers - 1);
    const std::uint32_t wb = std::min<std::uint32_t>(m.receive->worker, b.workers - 1);
    arrows.push_back({row_base[m.from] + wa, t.aligned(a, *m.send), row_base[m.to] + wb,
                      t.aligned(b, *m.receive), 1});
  }
  d["rows"] = std::move(rows);
  d["names"] = std::move(names);
  d["slices"] = std::move(slices);
  d["waits"] = std::move(waits);
  d["arrows"] = std::move(arrows);
  std::string data = d.dump();
  // Inside <script>, "</" would end the element early.
  for (std::size_t p = 0; (p = data.find("</", p)) != std::string::npos; p += 3)
    data.replace(p, 2, "<\\/");

  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
       "<title>ordo trace</title>\n<style>\n"
       "body{font-family:sans-serif;margin:12px;color:#222}\n"
       "#timeline{position:relative;width:100%;border:1px solid #ccc;overflow:hidden}\n"
       "#canvas{display:block;cursor:grab}\n"
       ".timeline-row{position:absolute;left:12px;font-size:12px;pointer-events:none}\n"
       "table{border-collapse:collapse;margin-bottom:12px}\n"
       "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right;font-size:13px}\n"
       "td:first-child,th:first-child{text-align:left}\n"
       "#tip{height:1.4em;font-size:13px}\n"
       "</style></head><body>\n<h1>ordo trace</h1>\n"
       "<p>Wheel: zoom at the pointer. Drag: pan. Double-click: whole run. "
       "<label><input type=\"checkbox\" id=\"show-grants\"> release &rarr; grant arrows</label> "
       "<label><input type=\"checkbox\" id=\"show-messages\"> message arrows</label> "
       "<label><input type=\"checkbox\" id=\"show-waits\"> lock waits (orange)</label></p>\n"
       "<div id=\"tip\"></div>\n"
       "<div id=\"timeline\"><canvas id=\"canvas\"></canvas></div>\n"
       "<p id=\"status\">rendering</p>\n";
  h += tables(s, t);
  h += "<script type=\"application/json\" id=\"trace-data\">" + data + "</script>\n";
  h += "<script>";
  h += kScript;
  h += "</script>\n</body></html>\n";
  return h;
}

}  // namespace ordo::tracefile
