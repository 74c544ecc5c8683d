"""slowlink.sim"""
