"""The run report's style sheet (``observe.report``): one page, no external assets.

Example:
    >>> CSS.lstrip().startswith("*{box-sizing:border-box}")
    True
"""

CSS = """
*{box-sizing:border-box}body{margin:0;background:#f4f5f7;color:#1f2430;font:14px/1.45 system-ui,-apple-system,
"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}main{max-width:1160px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 2px}h2{font-size:16px;margin:0 0 10px}h3{font-size:14px;margin:14px 0 6px}
.sub{color:#5b6372;margin-bottom:16px}.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:16px}
section{background:#fff;border:1px solid #e1e4ea;border-radius:8px;padding:16px;margin-bottom:16px;min-width:0}
.grid section{margin-bottom:0}.wide{margin-top:16px}svg{max-width:100%;height:auto;display:block}
svg text{font:12px system-ui,sans-serif;fill:#5b6372}.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(130px,1fr));gap:8px}
.tile{background:#f7f8fa;border-radius:6px;padding:8px 10px}.tile b{display:block;font-size:18px;font-variant-numeric:tabular-nums}
.tile span{color:#5b6372;font-size:12px}.bad b{color:#dc2626}.note{color:#5b6372;font-size:13px}
.legend span{display:inline-block;margin-right:14px;font-size:12px;color:#5b6372}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums}th,td{border-bottom:1px solid #e8eaef;
padding:4px 8px;text-align:left;vertical-align:top}th{background:#f7f8fa;font-weight:600}.scroll{overflow-x:auto}
td.num,th.num{text-align:right}th,td:first-child,td.num{white-space:nowrap}.drift{color:#dc2626}.alert{background:#fef2f2;border:1px solid #fecaca;color:#991b1b;
border-radius:8px;padding:10px 14px;margin-bottom:16px}.hit{background:#dcfce7}.miss{background:#fee2e2}
.null{color:#a3aab8;font-style:italic}.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;
background:#dcfce7;color:#166534;margin-left:8px;vertical-align:3px}.badge.failed{background:#fee2e2;color:#991b1b}
.calls{margin:8px 0 0;padding-left:18px;color:#5b6372;font-size:13px}
.pair{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}.pair>div{flex:1 1 460px;min-width:0}
.pair>div.whole{flex:1 1 auto}
"""
