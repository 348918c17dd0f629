"""Packaging for transformer_nb, driven by settings.ini (the classic nbdev layout, without pkg_resources)."""
from configparser import ConfigParser

import setuptools

cfg = ConfigParser(delimiters=["="])
cfg.read("settings.ini", encoding="utf-8")
cfg = cfg["DEFAULT"]

for key in "lib_name version description author author_email license min_python".split():
    assert key in cfg, f"settings.ini is missing `{key}`"

licenses = {
    "apache2": ("Apache Software License 2.0", "OSI Approved :: Apache Software License"),
    "mit": ("MIT License", "OSI Approved :: MIT License"),
}
statuses = ["1 - Planning", "2 - Pre-Alpha", "3 - Alpha", "4 - Beta", "5 - Production/Stable", "6 - Mature", "7 - Inactive"]
py_versions = "3.10 3.11 3.12 3.13 3.14".split()
min_python = cfg["min_python"]
lic = licenses.get(cfg["license"].lower(), (cfg["license"], None))

requirements = cfg.get("requirements", "").split()
viz_requirements = cfg.get("viz_requirements", "").split()
translate_requirements = cfg.get("translate_requirements", "").split()
serve_requirements = cfg.get("serve_requirements", "").split()
dev_requirements = viz_requirements + translate_requirements + serve_requirements + cfg.get("dev_requirements", "").split()
console_scripts = cfg.get("console_scripts", "").split()

setuptools.setup(
    name=cfg["lib_name"].replace("_", "-"),
    version=cfg["version"],
    license=lic[0],
    classifiers=[
        "Development Status :: " + statuses[int(cfg["status"])],
        "Intended Audience :: " + cfg["audience"].title(),
        "Natural Language :: " + cfg["language"].title(),
    ]
    + ["Programming Language :: Python :: " + v for v in py_versions[py_versions.index(min_python):]]
    + (["License :: " + lic[1]] if lic[1] else []),
    url=cfg["git_url"],
    packages=setuptools.find_packages(include=[cfg["lib_path"], cfg["lib_path"] + ".*"]),
    include_package_data=True,
    install_requires=requirements,
    extras_require={"viz": viz_requirements, "translate": translate_requirements, "serve": serve_requirements,
                    "dev": dev_requirements},
    python_requires=">=" + min_python,
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    zip_safe=False,
    entry_points={
        "console_scripts": console_scripts,
        "nbdev": [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"],
    },
    author=cfg["author"],
    author_email=cfg["author_email"],
    description=cfg["description"],
    keywords=cfg["keywords"],
)
