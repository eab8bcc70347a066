"""Safe loaders for untrusted structured data: depth-bounded JSON, no-globals pickle, hardened XML."""
from __future__ import annotations

import os
import pickle

import pytest

from postmortem.parsers.safeload import UnsafeInput, json_depth, loads_json, loads_pickle_restricted, parse_xml_hardened


def test_json_depth_ignores_brackets_in_strings():
    assert json_depth('{"a": "[[[[{{{{", "b": [[1]]}') == 3
    assert json_depth('"\\"[[["') == 0


def test_deep_json_refused_shallow_loaded():
    with pytest.raises(UnsafeInput):
        loads_json("[" * 65 + "]" * 65)
    assert loads_json("[" * 64 + "]" * 64) is not None


class _Boom:
    def __reduce__(self):
        return (os.system, ("echo should-not-run",))


def test_pickle_globals_refused_plain_data_loads():
    with pytest.raises(UnsafeInput):
        loads_pickle_restricted(pickle.dumps([_Boom()]))
    data = {"a": (1, 2.5, None, True), "b": [b"x", "y"], "c": {1: -2 ** 70}}
    assert loads_pickle_restricted(pickle.dumps(data, protocol=5)) == data


@pytest.mark.parametrize("text", [
    '<?xml version="1.0"?><!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>',
    '<!DOCTYPE a [<!ELEMENT a ANY>]><a/>',
    '<?xml version="1.0"?><!DOCTYPE a SYSTEM "x.dtd"><!DOCTYPE b SYSTEM "y.dtd"><a/>',
])
def test_xml_with_entities_or_dtd_subsets_refused(text):
    with pytest.raises(UnsafeInput):
        parse_xml_hardened(text)


def test_xml_plain_doctype_stripped_and_undefined_entity_is_malformed():
    root = parse_xml_hardened('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
                              "<nvidia_smi_log><attached_gpus>1</attached_gpus></nvidia_smi_log>")
    assert root.find("attached_gpus").text == "1"
    with pytest.raises(ValueError):
        parse_xml_hardened("<a>&undefined;</a>")
