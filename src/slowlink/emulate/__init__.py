"""slowlink.emulate"""
