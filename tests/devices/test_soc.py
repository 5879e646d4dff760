from __future__ import annotations

import shutil

import pytest

from flamingo_sim.devices.soc import CoreLayout, load_phones, state_space
from flamingo_sim.errors import ConfigError

SD845 = CoreLayout((0, 1, 2, 3), (4, 5, 6, 7), None)
SD865 = CoreLayout((0, 1, 2, 3), (4, 5, 6, 7), 7)


def test_pixel3_order_matches_the_paper():
    assert [c.label for c in state_space(SD845)] == ["4567", "456", "45", "4", "0123", "012", "01", "0"]


def test_sd865_has_11_choices_in_rule_order():
    labels = [c.label for c in state_space(SD865)]
    assert labels == ["4567", "457", "456", "47", "45", "7", "4", "0123", "012", "01", "0"]
    # rule 3: a Prime set beats a same-size set without it; rule 2: any big beats any low-power
    assert labels.index("457") < labels.index("456") and labels.index("7") < labels.index("4")
    assert labels.index("4") < labels.index("0123")


def test_choice_fields():
    c = state_space(SD865)[1]
    assert c.cores == (4, 5, 7) and c.n_threads == 3 and c.uses_prime and c.uses_big


def test_layout_validation():
    with pytest.raises(ValueError, match="prime core 3"):
        CoreLayout((0, 1, 2, 3), (4, 5), 3)
    with pytest.raises(ValueError, match="distinct"):
        CoreLayout((0, 1), (1, 2))


def test_shipped_phones(profiles_dir, tmp_path):
    # the tracked catalogue alone: a stray phones.d/ entry left by a user in a checkout changes nothing here
    shutil.copy(profiles_dir / "phones.yaml", tmp_path / "phones.yaml")
    phones = load_phones(tmp_path)
    assert set(phones) == {"galaxy_tab_s6", "oneplus_8", "pixel_3", "galaxy_s10e", "mi_10"}
    assert {n: p.soc.name for n, p in phones.items()} == {
        "galaxy_tab_s6": "sd855", "oneplus_8": "sd865", "pixel_3": "sd845", "galaxy_s10e": "sd855", "mi_10": "sd865"}
    assert {n: p.capacity_mah for n, p in phones.items()} == {
        "galaxy_tab_s6": 7040, "oneplus_8": 4300, "pixel_3": 2915, "galaxy_s10e": 3100, "mi_10": 4780}
    # 2915 mAh * 3.6 C/mAh * 3.85 V = 40401.9 J
    assert phones["pixel_3"].capacity_j == pytest.approx(40401.9)
    assert len(phones["pixel_3"].state_space()) == 8 and len(phones["mi_10"].state_space()) == 11


def test_bad_phones_file_names_file_and_key(profiles_dir, tmp_path):
    shutil.copy(profiles_dir / "phones.yaml", tmp_path / "phones.yaml")
    text = (tmp_path / "phones.yaml").read_text()
    (tmp_path / "phones.yaml").write_text(text.replace("capacity_mah: 2915", "capacity_mAh: 2915"))
    with pytest.raises(ConfigError, match=r"phones\.yaml.*unknown key 'phones\.pixel_3\.capacity_mAh'"):
        load_phones(tmp_path)
    (tmp_path / "phones.yaml").write_text(text.replace("soc: sd845", "soc: sd888"))
    with pytest.raises(ConfigError, match=r"phones\.yaml: phones\.pixel_3\.soc: unknown SoC 'sd888'"):
        load_phones(tmp_path)


def test_adding_a_phone_needs_no_code(profiles_dir, tmp_path):
    text = (profiles_dir / "phones.yaml").read_text()
    text += "  my_phone: {display_name: Mine, soc: sd845, capacity_mah: 4000}\n"
    (tmp_path / "phones.yaml").write_text(text)
    phones = load_phones(tmp_path)
    assert phones["my_phone"].voltage_v == 3.85 and phones["my_phone"].capacity_j == pytest.approx(4000 * 3.6 * 3.85)
