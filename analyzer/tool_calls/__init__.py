"""Phase 2: how the template writes tool calls, learned from renders alone.

The method, in order:

1. Render assistant turns with tool calls, varying one thing at a time (the function name,
   the call id, the arguments, the number of calls) and cut out the tool block (what the
   model would generate after the assistant header).
2. Find the arguments: either one serialized value (JSON, Python, ...: a standard format
   that writes every probe's arguments exactly), or one unit per argument (tagged), whose
   literals come from the zero/one/two-argument renders and whose value formats come from
   one probe per JSON type.
3. Split the rest of the call around the name and id needles into literal parts; split the
   one-call block from the two-call block into section markers, per-call parts and the
   separator; detect call indices (``functions.f:0``) from digit runs that count up.
4. Verify: format every probe through the structure and compare with the template's own
   rendering, byte for byte. Probe values never become markers: every literal is constant
   across renders in which the probe values differ.
5. Classify the skeleton into the design's enums and fields (``FUNC_JSON_OBJECT`` with its
   field names, ``FUNC_TAG_WITH_NAME`` with prefix/suffix/close, ...).
"""

from __future__ import annotations

from .context import probe_tools, PROBES, VERIFY, TYPE_PROBES, ESCAPE_PROBE, _Ctx
from .calls import _as_calls
from .analyze import analyze_tools, tools_section, template_tool_block, EXAMPLE_CALLS

__all__ = ["analyze_tools", "probe_tools", "tools_section", "template_tool_block", "PROBES", "VERIFY",
           "EXAMPLE_CALLS", "TYPE_PROBES", "ESCAPE_PROBE", "_as_calls", "_Ctx"]
