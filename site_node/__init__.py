"""The dsroc site daemon: the program a hospital runs next to its patient data, answering privacy-checked questions over gRPC.

Public helpers for other roles: :func:`site_node.security.pki.generate_dev_pki`,
:func:`site_node.interceptors.auth.hash_token`, :func:`site_node.interceptors.auth.new_token`,
:func:`site_node.testing.running_site` and :func:`site_node.cli.init.init_site`.
"""
